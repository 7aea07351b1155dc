"""What machine and Neuron SDK is this?  Read-only probes, safe without the SDK.

- ``instance_type()``: EC2 instance type from the DMI product name.
- ``neuron_devices()`` / ``free_cores()``: ``neuron-ls --json-output`` parsed (a list of
  devices with ``neuron_device``, ``nc_count``, ``neuroncore_ids``, ``neuron_processes``).
- ``sdk_info()``: versions of neuronx-cc, torch-neuronx, torch, torch-xla and whether
  ``neuronxcc.nki`` (the NKI 0.1 namespace; shipped up to SDK 2.29, a compile error in
  kernels from 2.30, see ``sdk.py``) is importable.
- ``hardware_skip_reason()``: why hardware tests cannot run here, or None.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys

from . import sdk as _sdk

PRODUCT_NAME_FILE = "/sys/devices/virtual/dmi/id/product_name"


def instance_type(path: str | None = None) -> str | None:
    """EC2 instance type (e.g. ``trn2.3xlarge``) or None when unreadable.

    ``path`` defaults to ``$NKI_HW_PRODUCT_NAME_FILE`` or the DMI product-name file.
    """
    path = path or os.environ.get("NKI_HW_PRODUCT_NAME_FILE", PRODUCT_NAME_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read().strip()
    except OSError:
        return None
    return value or None


def parse_neuron_ls(text: str) -> list[dict]:
    """Parse ``neuron-ls --json-output``: a JSON list with one object per device.

    Raises ValueError naming what is wrong with the payload.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"neuron-ls output is not JSON ({e}); first bytes: {text[:80]!r}") from None
    if not isinstance(data, list):
        raise ValueError(f"neuron-ls JSON must be a list of devices, got {type(data).__name__}")
    for i, dev in enumerate(data):
        if not isinstance(dev, dict) or "neuron_device" not in dev:
            raise ValueError(f"neuron-ls device #{i} has no 'neuron_device' field: {dev!r:.120}")
    return data


def neuron_devices(neuron_ls: str = "neuron-ls", timeout: float = 60.0) -> list[dict]:
    """Devices reported by ``neuron-ls --json-output``.

    Raises FileNotFoundError when the tool is missing and RuntimeError when it fails.
    """
    exe = shutil.which(neuron_ls)
    if exe is None:
        raise FileNotFoundError(f"{neuron_ls} not found on PATH (it ships in aws-neuronx-tools, /opt/aws/neuron/bin)")
    proc = subprocess.run([exe, "--json-output"], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{neuron_ls} --json-output exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:300]}"
        )
    return parse_neuron_ls(proc.stdout)


def device_cores(dev: dict) -> list[int]:
    """Core ids of one device: ``neuroncore_ids`` when present, else a range of ``nc_count``."""
    ids = dev.get("neuroncore_ids")
    if isinstance(ids, list) and ids:
        return [int(i) for i in ids]
    n = int(dev.get("nc_count") or 0)
    start = int(dev["neuron_device"]) * n
    return list(range(start, start + n))


def free_cores(devices: list[dict]) -> list[int]:
    """Core ids on devices that no process (other than neuron-ls itself) is using.

    neuron-ls reports processes per device, not per core, so a device in use counts as
    busy as a whole.
    """
    free: list[int] = []
    for dev in devices:
        procs = [p for p in dev.get("neuron_processes") or [] if not str(p.get("command", "")).startswith("neuron-ls")]
        if not procs:
            free.extend(device_cores(dev))
    return sorted(free)


def parse_core_spec(spec: str) -> list[int]:
    """``"0,2,4-7"`` -> [0, 2, 4, 5, 6, 7]; raises ValueError on malformed input."""
    cores: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad core list {spec!r}: use ids and ranges like 0,2,4-7")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"bad core range {part!r} in {spec!r}: end before start")
        cores.extend(range(a, b + 1))
    if not cores:
        raise ValueError(f"empty core list {spec!r}")
    return sorted(set(cores))


def choose_cores(spec: str, free: list[int]) -> list[int]:
    """Cores to use: ``spec`` is a count (``"4"``) or an id list (``"0-3"``, ``"0,8"``).

    A bare number is a count of free cores (lowest ids first); a list with a comma or a
    dash names cores. Raises ValueError when they are not all free.
    """
    spec = spec.strip()
    if spec.isdigit():
        n = int(spec)
        if n < 1:
            raise ValueError("--cores must be at least 1")
        if n > len(free):
            raise ValueError(f"asked for {n} free NeuronCores, only {len(free)} free: {free}")
        return free[:n]
    wanted = parse_core_spec(spec)
    busy = [c for c in wanted if c not in free]
    if busy:
        raise ValueError(f"NeuronCores {busy} are busy or absent; free cores: {free}")
    return wanted


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def sdk_release_for(neuronx_cc_version: str | None) -> str | None:
    """Neuron SDK release that shipped this neuronx-cc, e.g. ``2.21.18209.0`` -> ``2.26``
    (the table and its extrapolation beyond 2.32 are in ``sdk.py``)."""
    return _sdk.release_from_neuronx_cc(neuronx_cc_version)[0]


def sdk_info() -> dict:
    """Versions of the Neuron Python packages in this interpreter (None when absent)."""
    cc = _version("neuronx-cc")
    if cc is None and _has_module("neuronxcc"):
        try:
            import neuronxcc  # noqa: PLC0415 - the Neuron SDK: imported only when installed

            cc = getattr(neuronxcc, "__version__", None)
        except Exception:  # a broken install still reports the rest
            cc = None
    return {
        "python": sys.version.split()[0],
        "neuronx_cc": cc,
        "sdk_release": sdk_release_for(cc),
        "has_neuronxcc": _has_module("neuronxcc"),
        "has_neuronxcc_nki": _has_module("neuronxcc") and _has_module("neuronxcc.nki"),
        "torch": _version("torch"),
        "torch_neuronx": _version("torch-neuronx"),
        "torch_xla": _version("torch-xla"),
        "numpy": _version("numpy"),
        "nki_backend_env": os.environ.get("NKI_BACKEND"),
        "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES"),
    }


def sdk_problem(info: dict | None = None) -> str | None:
    """Why this SDK cannot run the NKI 0.1 kernels, or None when it can."""
    info = info or sdk_info()
    if not info["has_neuronxcc"]:
        return (
            "neuronx-cc is not installed (neuronxcc not importable); activate a Neuron "
            "SDK 2.26/2.27 venv such as /opt/aws_neuronx_venv_pytorch_2_8"
        )
    if not info["has_neuronxcc_nki"]:
        return (
            f"the installed SDK lacks neuronxcc.nki (neuronx-cc {info['neuronx_cc']}, "
            f"SDK {info['sdk_release'] or 'unknown'}); the NKI 0.1 kernels need Neuron SDK 2.26 "
            "or 2.27 (neuronx-cc 2.21/2.22); on SDK >= 2.33 run_hw.sh takes the NKI 0.7 path"
        )
    return None


def device_problem(dev_glob: str = "/dev/neuron*") -> str | None:
    """Why there is no usable Neuron device, or None when ``/dev/neuron*`` exists."""
    if glob.glob(dev_glob):
        return None
    return f"no Neuron device ({dev_glob} absent): hardware tests need a trn2 instance"


def hardware_skip_reason() -> str | None:
    """One sentence saying why hardware tests cannot run here, or None if they can."""
    reasons = []
    if os.environ.get("NKI_BACKEND", "").strip().lower() == "sim":
        reasons.append("NKI_BACKEND=sim forces the NumPy interpreter (set NKI_BACKEND=neuron)")
    dev = device_problem()
    if dev:
        reasons.append(dev)
    sdk = sdk_problem()
    if sdk:
        reasons.append(sdk)
    return "; ".join(reasons) or None


def main(argv: list[str] | None = None) -> int:
    """``python -m nki_kernels.hw.env sdk | devices FILE | free-cores FILE | choose-cores SPEC FILE``.

    FILE holds ``neuron-ls --json-output``; the hardware job runs ``sdk`` with the Neuron venv's
    python (its versions go to ``env/sdk.json``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv else "sdk"
    if cmd == "sdk":
        print(json.dumps(sdk_info(), indent=2))
        return 0
    if cmd in ("devices", "free-cores", "choose-cores"):
        path = argv[-1]
        try:
            with open(path, encoding="utf-8") as f:
                devices = parse_neuron_ls(f.read())
            free = free_cores(devices)
            if cmd == "devices":
                print(len(devices))
                return 0
            if cmd == "free-cores":
                print(" ".join(map(str, free)))
                return 0
            print(" ".join(map(str, choose_cores(argv[1], free))))
            return 0
        except (OSError, ValueError) as e:
            print(str(e), file=sys.stderr)
            return 1
    print(
        f"unknown command {cmd!r}; allowed: sdk, devices FILE, free-cores FILE, choose-cores SPEC FILE", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
