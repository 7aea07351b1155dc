"""Which Neuron SDK is installed, and which hardware path (NKI 0.1 or NKI 0.7) it can run.

Standard library only, so ``scripts/run_hw.sh`` runs this file as a script with the Neuron
venv's Python before anything is installed::

    python nki_kernels/hw/sdk.py path     # one line "<path> <message>"; exit code below
    python nki_kernels/hw/sdk.py info     # JSON: versions, release, the decision

Releases and package versions (aws-neuron-sdk 81ce03ae, ``src/helperscripts/n2-manifest.json``
and ``release-notes/components/nki.rst``):

=======  ==========  ==========  =====================================================
SDK      neuronx-cc  nki         what it means for this project
=======  ==========  ==========  =====================================================
2.26     2.21        (none)      NKI 0.1 ``neuronxcc.nki``: the 0.1 path (CS149 image)
2.27     2.22        0.1.0       ``neuronxcc.nki`` still the 0.1 API: the 0.1 path
2.28     2.23        0.2.0       ``neuronxcc.nki`` kept, removal postponed (2.28 notes): 0.1 path, warning
2.29     2.24        0.3.0       both namespaces still supported (2.29 notes): 0.1 path, warning
2.30     2.25        0.4.0       ``neuronxcc.nki`` in a kernel is a compile error (2.30 notes): refused
2.31     2.26        0.5.0       refused (same)
2.32     2.27        0.6.0       refused; ``baremetal`` exits 0 with all-zero outputs (nki-samples#134)
2.33     2.28 *      0.7.x       the NKI 0.7 path (``import nki``)
=======  ==========  ==========  =====================================================

``*`` SDK 2.33 is newer than the pinned documentation (the last documented release is 2.32,
NKI 0.6.0); that NKI 0.7 ships in SDK 2.33 is this project's premise, not documented yet.  The neuronx-cc line of
2.33 is extrapolated from the pattern above (neuronx-cc 2.N is SDK 2.(N+5)), and so is any
later release: such a release is reported as ``extrapolated``.

Decision (``decide``): a real ``nki`` package of version >= 0.7 selects the 0.7 path;
otherwise the neuronx-cc release decides between the 0.1 path (2.26/2.27; 2.28/2.29 with a
warning), a refusal (>= 2.30, or NKI 0.4-0.6 without a usable neuronx-cc) and "no SDK".
A ``nki`` module without ``jit`` (PyPI's empty placeholder) or the project's own interpreter
alias does not count as a real NKI.

``path`` exit codes: 0 usable (stdout ``nki01 ...`` or ``nki07 ...``), 1 no usable Neuron SDK
(run_hw.sh exit 12), 3 refused: the SDK would miscompile or silently misbehave (run_hw.sh
exit 18).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from dataclasses import asdict, dataclass, field

# neuronx-cc major.minor -> SDK release (n2-manifest.json at 81ce03ae).
NEURONX_CC_TO_SDK = {
    "2.20": "2.25",
    "2.21": "2.26",
    "2.22": "2.27",
    "2.23": "2.28",
    "2.24": "2.29",
    "2.25": "2.30",
    "2.26": "2.31",
    "2.27": "2.32",
}
# nki package major.minor -> SDK release (n2-manifest.json; nki.rst release headings).
# 0.7 -> 2.33 is this project's premise, not in the pinned documentation.
NKI_TO_SDK = {
    "0.1": "2.27",
    "0.2": "2.28",
    "0.3": "2.29",
    "0.4": "2.30",
    "0.5": "2.31",
    "0.6": "2.32",
    "0.7": "2.33",
}
DOCUMENTED_UP_TO = "2.32"

NKI01_OK = ("2.26", "2.27")  # the NKI 0.1 kernels' target
NKI01_WARN = ("2.28", "2.29")  # neuronxcc.nki still shipped but deprecated
FIRST_REFUSED = (2, 30)  # neuronxcc.nki in a kernel: compile error from here on
FIRST_NKI07 = (2, 33)  # NKI 0.7
NKI07_MIN_VERSION = (0, 7)

FIX = (
    "use a DLAMI of Neuron SDK 2.26/2.27 for the NKI 0.1 kernels "
    "(/opt/aws_neuronx_venv_pytorch_2_8) or SDK >= 2.33 for the NKI 0.7 kernels"
)

EXIT_OK, EXIT_MISSING, EXIT_REFUSED = 0, 1, 3


def _major_minor(version: str | None) -> tuple[int, int] | None:
    """``"2.24.8799.0+fake"`` -> (2, 24); None when unparsable."""
    if not version:
        return None
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _fmt(mm: tuple[int, int]) -> str:
    return f"{mm[0]}.{mm[1]}"


def release_from_neuronx_cc(version: str | None) -> tuple[str | None, bool]:
    """(SDK release, extrapolated?) for a neuronx-cc version; (None, False) if unknown."""
    mm = _major_minor(version)
    if mm is None:
        return None, False
    known = NEURONX_CC_TO_SDK.get(_fmt(mm))
    if known:
        return known, False
    if mm[0] == 2 and mm[1] > 27:  # newer than documented: neuronx-cc 2.N = SDK 2.(N+5)
        return f"2.{mm[1] + 5}", True
    return None, False


def release_from_nki(version: str | None) -> tuple[str | None, bool]:
    """(SDK release, extrapolated?) for an ``nki`` package version."""
    mm = _major_minor(version)
    if mm is None:
        return None, False
    known = NKI_TO_SDK.get(_fmt(mm))
    if known:
        return known, _fmt(mm) not in ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6")
    if mm[0] == 0 and mm[1] > 7:  # nki 0.N = SDK 2.(N+26)
        return f"2.{mm[1] + 26}", True
    return None, False


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _find(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def probe() -> dict:
    """Versions of the Neuron packages importable here (None when absent).

    Imports ``neuronxcc`` and ``nki`` (both only when present) to read ``__version__`` and
    to tell a real ``nki`` (it has ``jit``) from a placeholder or the project's interpreter.
    """
    info = {
        "neuronx_cc": _dist_version("neuronx-cc"),
        "has_neuronxcc": _find("neuronxcc"),
        "has_neuronxcc_nki": False,
        "nki": _dist_version("nki"),
        "has_nki": _find("nki"),
        "nki_is_real": False,
        "nki_has_simulate": False,
        "nki_note": None,
        "torch_neuronx": _dist_version("torch-neuronx"),
        "torch_xla": _dist_version("torch-xla"),
    }
    if info["has_neuronxcc"]:
        try:
            import neuronxcc  # noqa: PLC0415 - the Neuron SDK: imported only when installed

            info["neuronx_cc"] = info["neuronx_cc"] or getattr(neuronxcc, "__version__", None)
            info["has_neuronxcc_nki"] = not getattr(neuronxcc, "__nki_kernels_sim__", False) and _find("neuronxcc.nki")
        except Exception as e:  # noqa: BLE001  (a broken install is reported, not raised)
            info["nki_note"] = f"import neuronxcc failed: {e}"
    if info["has_nki"]:
        try:
            import nki  # noqa: PLC0415 - the Neuron SDK: imported only when installed

            info["nki"] = info["nki"] or getattr(nki, "__version__", None)
            if getattr(nki, "__nki_kernels_sim__", False):
                info["nki_note"] = "nki is the project's interpreter alias, not the Neuron SDK"
            elif not callable(getattr(nki, "jit", None)):
                info["nki_note"] = "nki has no jit(): a placeholder package, not the Neuron SDK"
            else:
                info["nki_is_real"] = True
                info["nki_has_simulate"] = callable(getattr(nki, "simulate", None))
        except Exception as e:  # noqa: BLE001
            info["nki_note"] = f"import nki failed: {e}"
    return info


@dataclass
class Decision:
    """What run_hw.sh should do with this SDK."""

    path: str | None  # "nki01", "nki07" or None (refused / missing)
    code: int  # EXIT_OK, EXIT_MISSING or EXIT_REFUSED
    message: str  # one line for the preflight report
    release: str | None = None  # SDK release, e.g. "2.33"
    release_source: str | None = None
    extrapolated: bool = False
    warnings: list[str] = field(default_factory=list)


def decide(info: dict) -> Decision:
    """The hardware path for the probed versions (see the module docstring)."""
    cc, nki_v = info.get("neuronx_cc"), info.get("nki") if info.get("nki_is_real") else None
    cc_rel, cc_x = release_from_neuronx_cc(cc)
    nki_rel, nki_x = release_from_nki(nki_v)
    nki_mm = _major_minor(nki_v)
    versions = ", ".join(s for s in (f"neuronx-cc {cc}" if cc else "", f"nki {nki_v}" if nki_v else "") if s)

    if nki_mm is not None and nki_mm >= NKI07_MIN_VERSION:
        d = Decision("nki07", EXIT_OK, "", nki_rel, f"nki {nki_v}", nki_x)
        if nki_mm > NKI07_MIN_VERSION:
            d.warnings.append(
                f"SDK {nki_rel} is newer than the documentation this project was "
                f"written against (<= {DOCUMENTED_UP_TO}); untested"
            )
        if cc_rel and cc_rel != nki_rel:
            d.warnings.append(f"neuronx-cc {cc} belongs to SDK {cc_rel}, nki {nki_v} to SDK {nki_rel}")
        d.message = f"SDK {nki_rel} ({versions}): NKI 0.7 path" + _warn_suffix(d)
        return d

    cc_mm = _major_minor(cc_rel)
    if cc_rel is not None and cc_mm is not None:
        mm = cc_mm
        d = Decision(None, EXIT_OK, "", cc_rel, f"neuronx-cc {cc}", cc_x)
        if mm >= FIRST_REFUSED:
            d.code = EXIT_REFUSED
            why = "neuronxcc.nki kernels no longer compile from SDK 2.30 on" + (
                "; on 2.32 nki.baremetal exits 0 with all-zero outputs" if cc_rel == "2.32" else ""
            )
            if mm >= FIRST_NKI07:
                why = f"no NKI >= 0.7 package found for the 0.7 path ({info.get('nki_note') or 'nki missing'})"
            d.message = f"SDK {cc_rel} ({versions}) refused: {why}. Fix: {FIX}"
            return d
        if not info.get("has_neuronxcc_nki"):
            d.code = EXIT_MISSING
            d.message = (
                f"the installed SDK lacks neuronxcc.nki ({versions}, SDK {cc_rel}); "
                f"the NKI 0.1 kernels need it. Fix: {FIX}"
            )
            return d
        d.path = "nki01"
        if cc_rel in NKI01_WARN:
            d.warnings.append(
                f"neuronxcc.nki is deprecated in SDK {cc_rel} (removed as a kernel "
                "namespace in 2.30); the NKI 0.1 kernels target 2.26/2.27, untested here"
            )
        elif cc_rel not in NKI01_OK:
            d.warnings.append(f"SDK {cc_rel} is older than 2.26; untested")
        d.message = f"SDK {cc_rel} ({versions}) with neuronxcc.nki: NKI 0.1 path" + _warn_suffix(d)
        return d

    if nki_rel is not None and nki_mm is not None:  # a real nki 0.2-0.6 without a known neuronx-cc
        return Decision(
            None,
            EXIT_REFUSED,
            f"SDK {nki_rel} ({versions}) refused: NKI {_fmt(nki_mm)} is neither the 0.1 API "
            f"(neuronxcc.nki) nor >= 0.7. Fix: {FIX}",
            nki_rel,
            f"nki {nki_v}",
            nki_x,
        )
    why = "neuronx-cc is not installed (neuronxcc not importable)" if not cc else f"unknown neuronx-cc {cc}"
    note = f"; {info['nki_note']}" if info.get("nki_note") else ""
    return Decision(None, EXIT_MISSING, f"no usable Neuron SDK: {why}{note}. Fix: {FIX}")


def _warn_suffix(d: Decision) -> str:
    return "".join(f" (warning: {w})" for w in d.warnings)


def report() -> dict:
    """Probe and decision together (what ``info`` prints and bench records keep)."""
    info = probe()
    return {"versions": info, "decision": asdict(decide(info))}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv else "info"
    if cmd == "info":
        print(json.dumps(report(), indent=2))
        return 0
    if cmd == "path":
        d = decide(probe())
        print(f"{d.path or '-'} {d.message}")
        return d.code
    print(f"sdk.py: unknown command {cmd!r}; allowed: info, path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
