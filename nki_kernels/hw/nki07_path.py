"""The NKI 0.7 hardware path (Neuron SDK >= 2.33, ``import nki``): its implementation of the hardware
job's protocol (``nki_kernels.hw.protocol``), what ``scripts/run_hw.sh`` runs on a current trn2
DLAMI, step by step, and what you can run by hand::

    python -m nki_kernels.hw.nki07_path smoke    --out FILE.json
    python -m nki_kernels.hw.nki07_path check    --kernel matmul --shapes quick --out DIR
    python -m nki_kernels.hw.nki07_path bench    --kernel matmul --case NAME --out DIR [--warmup 10 --iters 100]
    python -m nki_kernels.hw.nki07_path estimate --kernel matmul --case NAME --out DIR
    python -m nki_kernels.hw.nki07_path simulate --kernel matmul --case NAME --out FILE.npy

NKI 0.7 has no ``nki.baremetal`` / ``nki.benchmark`` / ``nki.profile`` (they left with NKI
0.2: 2.27 and 2.28 release notes; the 0.6 ``nki`` module documents only ``jit`` and
``simulate``, ``nki/api/nki/__init__.py`` at 81ce03ae).  So:

- **correctness** (``check``): the ``@nki.jit`` kernel called on NumPy arrays, which
  "compiles and executes standalone kernel, without a framework" (``nki.jit`` docstring), and
  the same kernel inside a ``torch.nn.Module`` on ``torch_xla`` tensors (``torch_path``),
  each against the float64 oracle / torch CPU.  Where the SDK has ``nki.simulate``, the
  official simulator and this project's interpreter run the same seeded inputs and their
  differences to the device are written to ``DIR/sim_vs_device/`` (the cross-check).
- **NEFF**: ``NEURON_FRAMEWORK_DEBUG=1`` makes the compiler save the NEFF in the working
  directory (``nki/guides/use-neuron-profile.rst``); the first call compiles it, and
  ``bench`` renames the new ``.neff`` to ``<stem>.neff``.
- **latency** (``bench``): ``neuron-explorer capture -n <stem>.neff -s lat.ntff
  --num-exec=W+I --profile-nth-exec=1`` profiles every execution (flags:
  ``tools/neuron-explorer/how-to-profile-workload.rst``; file names ``lat.ntff``,
  ``lat_exec_2.ntff``, ... as nki-library's ``test/utils/profiler_utils.py`` expects them),
  then ``neuron-explorer view ... --output-format summary-json`` gives each execution's
  ``total_time``; the first W are warm-up, the last I give p0..p100.  Recorded in
  ``bench.json`` with the same fields as the NKI 0.1 path's (p50/p99, iterations, SDK, core).
  The per-execution NTFFs are deleted once read; run_hw.sh's separate ``capture
  --profile-nth-exec=2`` step keeps one profile per case.
- **smoke** runs first: one tiny kernel per NKI 0.7 construct the kernels rely on
  (``nki_kernels.kernels.smoke_nki07``), so a first hardware run names a failing construct
  within a minute.

Kernels: ``NKI_HW_KERNEL_<NAME>`` (module:function) selects a kernel exactly as on the 0.1
path; unset, it defaults to this project's 0.7 kernel (the registry's ``entry_07``).  LNC: kernels
are launched at LNC=1 (``kernel(...)``; run_hw.sh sets ``NEURON_LOGICAL_NC_CONFIG=1``,
which must match, ``nki.jit`` docstring); ``--lnc 2`` launches ``kernel[2](...)``.

Importing this module needs neither the SDK nor torch.  Hardware numbers are recorded,
never asserted; nothing here has run on a Trainium yet.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from typing import Any

from nki_kernels.kernels import registry
from nki_kernels.kernels.registry import Case

from . import compare, device, env, sdk, torch_path
from .protocol import DEFAULT_SEED, HwPath, Step, StepContext, cs149_verdict, env_argv, estimate_ratio, stem
from .protocol import utc as _utc
from .protocol import write_json as _write_json

API = "nki-0.7"
SMOKE_MODULE = "nki_kernels.kernels.smoke_nki07"
PROFILER = "neuron-explorer"
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def _nki() -> Any:
    """The real NKI 0.7 ``nki`` module; ImportError with the fix when absent."""
    try:
        import nki  # noqa: PLC0415 - the Neuron SDK (>= 2.33): only in its venv on a trn2
    except ImportError as e:
        raise ImportError(
            "nki is not importable: run in a Neuron SDK >= 2.33 venv on a trn2 "
            "instance (see docs/hardware.md, 'NKI 0.7 path')"
        ) from e
    if getattr(nki, "__nki_kernels_sim__", False) or not callable(getattr(nki, "jit", None)):
        raise ImportError(
            "the importable nki is not the Neuron SDK's (the project's interpreter "
            "alias or PyPI's placeholder); activate the DLAMI's Neuron venv"
        )
    return nki


def launch(kernel: Any, lnc: int = 1) -> Any:
    """The kernel as launched at ``lnc`` logical cores: ``kernel`` or ``kernel[lnc]``."""
    if lnc < 1:
        raise ValueError(f"--lnc must be 1 or 2, got {lnc}")
    return kernel[lnc] if lnc > 1 else kernel


def _first_output(out: Any) -> Any:
    """A kernel returns one array (or a one-element tuple/list of it)."""
    if isinstance(out, (tuple, list)):
        if len(out) != 1:
            raise ValueError(f"the kernel returned {len(out)} outputs; expected one")
        out = out[0]
    return out


# ------------------------------------------------------------------------- NEFF files
def neff_files(folder: str) -> set[str]:
    return set(glob.glob(os.path.join(folder, "**", "*.neff"), recursive=True))


def adopt_neff(folder: str, before: set[str], target: str) -> tuple[str | None, list[str]]:
    """Rename the NEFF the compiler just wrote under ``folder`` to ``target``.

    With ``NEURON_FRAMEWORK_DEBUG=1`` the compiler writes the NEFF into the working
    directory under a name of its own; a standalone NumPy call compiles only the kernel, so
    exactly one new file is expected.  With several, the newest is taken and all are
    returned (recorded in bench.json).  Returns (path or None, relative names of the new files).
    """
    new = sorted(neff_files(folder) - before, key=os.path.getmtime)
    rel = [os.path.relpath(p, folder) for p in new]
    if not new:
        return None, rel
    os.replace(new[-1], target)
    return target, rel


# ------------------------------------------------------------------------- profiles
def capture_cmd(neff: str, ntff: str, *, num_exec: int, profile_nth: int, tool: str = PROFILER) -> list[str]:
    return [tool, "capture", "-n", neff, "-s", ntff, f"--num-exec={num_exec}", f"--profile-nth-exec={profile_nth}"]


def summary_cmd(neff: str, ntff: str, tool: str = PROFILER) -> list[str]:
    return [tool, "view", "-n", neff, "-s", ntff, "--output-format", "summary-json"]


_EXEC_RE = re.compile(r"_exec_(\d+)\.ntff$")


def exec_ntffs(folder: str, base: str) -> list[tuple[int, str]]:
    """``(execution number, path)`` of a capture's NTFFs: ``base.ntff`` is execution 1,
    ``base_exec_<k>.ntff`` execution k (nki-library ``profiler_utils.py``)."""
    out = []
    first = os.path.join(folder, f"{base}.ntff")
    if os.path.exists(first):
        out.append((1, first))
    for path in glob.glob(os.path.join(folder, f"{glob.escape(base)}_exec_*.ntff")):
        m = _EXEC_RE.search(path)
        if m:
            out.append((int(m.group(1)), path))
    return sorted(out)


def total_time_us(summary_text: str) -> float:
    """``total_time`` (seconds in neuron-profile/explorer summaries) in microseconds."""
    summary = compare.load_profile_summary(compare._first_json_value(summary_text))
    value = compare._as_number(summary.get("total_time"))
    if value is None or value <= 0:
        raise ValueError(f"summary-json has no positive total_time: {sorted(summary)[:12]}")
    return value * 1e6


def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (NumPy's default method)."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _run(cmd: list[str], cwd: str, timeout: float | None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:500]}")
    return proc.stdout


def measure_latency(neff: str, *, warmup: int, iters: int, tool: str = PROFILER, timeout: float | None = None) -> dict:
    """Per-execution device time of ``neff`` from one profiled multi-execution capture.

    Returns ``{"samples_us": [...] (the last ``iters`` executions), "warmup", "iters",
    "percentiles_us": {"p0": ...}, "command": [...]}``.  Raises RuntimeError when the tool
    fails or writes fewer profiles than executions.
    """
    if warmup < 0 or iters < 1:
        raise ValueError(f"warmup must be >= 0 and iters >= 1, got warmup={warmup}, iters={iters}")
    folder = os.path.dirname(os.path.abspath(neff))
    work = os.path.join(folder, "latency")
    os.makedirs(work, exist_ok=True)
    neff_rel = os.path.relpath(os.path.abspath(neff), work)
    cmd = capture_cmd(neff_rel, "lat.ntff", num_exec=warmup + iters, profile_nth=1, tool=tool)
    _run(cmd, work, timeout)
    found = exec_ntffs(work, "lat")
    if len(found) < warmup + iters:
        raise RuntimeError(
            f"{tool} capture --num-exec={warmup + iters} wrote {len(found)} profiles "
            f"in {work}: {[os.path.basename(p) for _, p in found][:6]}"
        )
    samples = []
    for k, path in found:
        if k > warmup:
            samples.append(total_time_us(_run(summary_cmd(neff_rel, os.path.basename(path), tool), work, timeout)))
        os.remove(path)  # NTFFs can be large; the profile step keeps its own
    if not os.listdir(work):
        os.rmdir(work)
    samples = samples[-iters:]
    ordered = sorted(samples)
    pct = {f"p{p}": percentile(ordered, p) for p in PERCENTILES}
    return {"samples_us": samples, "warmup": warmup, "iters": len(samples), "percentiles_us": pct, "command": cmd}


# ------------------------------------------------------------------------- helpers
def _sdk_record() -> dict[str, Any]:
    rec = env.sdk_info()
    rec["path"] = sdk.report()
    return rec


def official_simulate(kernel: Any, args: Any, kwargs: Any) -> Any:
    """``nki.simulate`` of a kernel.  The project's 0.7 kernels are host entries (checks and
    plan in Python, then the ``@nki.jit`` kernel: ``kernels/_nki07.py``); for those the jitted
    kernel is simulated with the arguments the entry would pass it."""
    nki = _nki()
    if callable(getattr(kernel, "prepare", None)) and getattr(kernel, "kernel", None) is not None:
        a, kw = kernel.prepare(*args, **kwargs)
        return nki.simulate(kernel.kernel)(*a, **kw)
    return nki.simulate(kernel)(*args, **kwargs)


def write_junit(path: str, suite: str, rows: list[dict]) -> None:
    """The smoke results as a JUnit XML file (one ``testcase`` per construct, a ``failure``
    naming what failed, the kernels using it and the flag that avoids it), so run_hw.sh
    reports the 0.7 smoke test exactly as the 0.1 one (pytest's report)."""
    root = ET.Element("testsuite", name=suite, tests=str(len(rows)), failures=str(sum(1 for r in rows if not r["ok"])))
    for r in rows:
        case = ET.SubElement(root, "testcase", classname=suite, name=r["name"])
        if not r["ok"]:
            avoid = f"avoid it with {r['flag']}" if r["flag"] else "no kernel flag avoids it"
            ET.SubElement(case, "failure", message=f"{r['error']} (used by {r['used_by']}; {avoid})")
    tmp = f"{path}.tmp"
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)


# ------------------------------------------------------------------------- the path
class Nki07Path(HwPath):
    """SDK >= 2.33: ``@nki.jit`` calls on NumPy and torch-xla, the ``nki.simulate`` cross-check,
    latency from profiled executions and captures with ``neuron-explorer``."""

    name, api, label, module = "nki07", "0.7", API, "nki_kernels.hw.nki07_path"
    profiler = PROFILER
    # Every device step runs at LNC=1, as the kernels are launched (the two must match, nki.jit
    # docstring); the bench step keeps the compiler's NEFF (NKI profiling guide,
    # nki/guides/use-neuron-profile.rst @81ce03ae).  The capture skips the first, warm-up
    # execution: --profile-nth-exec=2 writes <stem>_exec_2.ntff (renamed by after_capture).
    device_env = {"NEURON_LOGICAL_NC_CONFIG": "1"}
    bench_env = {"NEURON_FRAMEWORK_DEBUG": "1"}
    capture_args = ("--profile-nth-exec=2",)
    executed_by = "nki_kernels.sim (interpreter, NKI 0.7 front end)"

    # -- commands
    def has_smoke_test(self, ctx: StepContext) -> bool:
        return True  # a module of this package, always there

    def smoke_step(self, ctx: StepContext, core: str) -> Step:
        folder = os.path.join(ctx.run, "hw_tests")
        argv = env_argv(
            {"NEURON_RT_VISIBLE_CORES": core, **self.device_env, "PYTHONPATH": ctx.pythonpath},
            ctx.python,
            "-m",
            self.module,
            "smoke",
            "--out",
            os.path.join(folder, "smoke_nki07.json"),
            "--junitxml",
            os.path.join(folder, "constructs.junit.xml"),
        )
        return Step("constructs", "constructs", argv, folder, core=core)

    def check_step(self, ctx: StepContext, kernel: str, core: str) -> Step:
        """NumPy call + torch-neuronx + nki.simulate cross-check, JSON in ``hw_tests/<kernel>.nki07.json``."""
        folder = os.path.join(ctx.run, "hw_tests")
        argv = env_argv(
            {"NEURON_RT_VISIBLE_CORES": core, **self.device_env, "PYTHONPATH": ctx.pythonpath},
            ctx.python,
            "-m",
            self.module,
            "check",
            "--kernel",
            kernel,
            "--shapes",
            ctx.shapes,
            "--out",
            folder,
            "--timeout",
            str(ctx.timeout),
        )
        return Step(f"hw_tests-{kernel}", "hw_tests", argv, folder, kernel=kernel, core=core)

    def after_capture(self, folder: str, case_stem: str) -> None:
        target, nth = os.path.join(folder, f"{case_stem}.ntff"), os.path.join(folder, f"{case_stem}_exec_2.ntff")
        if not os.path.exists(target) and os.path.exists(nth):
            os.replace(nth, target)

    # -- step bodies
    def interpreter(self) -> Any:
        """This process runs 0.7 kernels on the interpreter: ``NKI_BACKEND=sim`` (the project's kernels
        resolve their ``nki`` through ``backend.resolve("0.7")``) and ``import nki`` aliased to it (your
        own kernel via ``NKI_HW_KERNEL_<NAME>``, written with a plain ``import nki``)."""
        os.environ["NKI_BACKEND"] = "sim"
        from nki_kernels.sim import install_nki_alias  # here: the job's own process has the standard library only

        return install_nki_alias()

    def run_numpy(self, case: Case, seed: int = DEFAULT_SEED, lnc: int = 1) -> tuple[Any, Any, Any]:
        """(args, kwargs, output) of the case's 0.7 kernel called on NumPy arrays."""
        args, kwargs = device.make_inputs(case, seed)
        out = _first_output(launch(device.load_kernel(case.kernel, self.api), lnc)(*args, **kwargs))
        return args, kwargs, out

    def bench_case(
        self,
        case: Case,
        out_dir: str,
        *,
        warmup: int,
        iters: int,
        seed: int = DEFAULT_SEED,
        tool: str = PROFILER,
        lnc: int = 1,
        timeout: float | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Compile (keeping the NEFF), check the first output, measure latency; write bench.json.

        Raises RuntimeError when no NEFF appears (set ``NEURON_FRAMEWORK_DEBUG=1`` before the first
        compile; a cached compile may write none: delete the cache) or the capture fails.
        """
        os.makedirs(out_dir, exist_ok=True)
        os.environ.setdefault("NEURON_FRAMEWORK_DEBUG", "1")
        target = os.path.join(out_dir, f"{stem(case)}.neff")
        before = neff_files(out_dir)
        cwd = os.getcwd()
        os.chdir(out_dir)  # the compiler drops the NEFF in the working directory
        try:
            args, kwargs, out = self.run_numpy(case, seed, lnc)
        finally:
            os.chdir(cwd)
        first: dict[str, Any]
        try:
            first = {
                "max_abs_err": device.assert_close(out, device.reference(case, args, kwargs), case.dtype, case.case_id),
                "ok": True,
            }
        except AssertionError as e:
            first = {"ok": False, "error": str(e)}
        neff, new = adopt_neff(out_dir, before, target)
        if neff is None:
            raise RuntimeError(
                f"no NEFF was written under {out_dir} by the first call of {case.case_id}: "
                "NEURON_FRAMEWORK_DEBUG=1 must be set before the kernel is compiled, and a "
                "cached compile may write none (delete the Neuron compile cache)"
            )
        lat = measure_latency(neff, warmup=warmup, iters=iters, tool=tool, timeout=timeout)
        p50, p99 = lat["percentiles_us"]["p50"], lat["percentiles_us"]["p99"]
        record = {
            "kernel": case.kernel,
            "case": case.name,
            "params": case.p,
            "dtype": case.dtype,
            "seed": seed,
            "warmup": lat["warmup"],
            "iters": lat["iters"],
            "latency_us": lat["percentiles_us"],
            "p50_us": p50,
            "p99_us": p99,
            "samples_us": lat["samples_us"],
            "api": API,
            "lnc": lnc,
            "measured_with": " ".join(lat["command"]) + "; total_time of each profiled execution "
            "from view --output-format summary-json",
            "kernel_impl": device.kernel_target(case.kernel, self.api),
            "core": os.environ.get("NEURON_RT_VISIBLE_CORES"),
            "instance_type": env.instance_type(),
            "sdk": _sdk_record(),
            "neff": os.path.basename(neff),
            "neff_candidates": new,
            "first_call": first,
            "cs149": cs149_verdict(p99, case.threshold_us),
            "vs_estimate": estimate_ratio(p50, p99, os.path.join(out_dir, f"{stem(case)}.estimate.json")),
            "utc": _utc(),
            "note": "device time per profiled execution (neuron-explorer); thresholds and estimate "
            "ratios are reported, not asserted",
        }
        _write_json(os.path.join(out_dir, "bench.json"), record)
        return record

    def _interpreter_output(self, case: Case, seed: int, tmp: str, timeout: float | None) -> Any:
        """The project's interpreter on the same seeded inputs, in a fresh ``NKI_BACKEND=sim`` process."""
        import numpy as np  # here: the job's own process has the standard library only

        out = os.path.join(tmp, f"{stem(case)}.interpreter.npy")
        self.in_subprocess("simulate", case, out, seed, timeout)
        try:
            return np.load(out)
        finally:
            os.remove(out)  # the record keeps the differences

    def cross_check(
        self, case: Case, device_out: Any, args: Any, kwargs: Any, out_dir: str, seed: int, timeout: float | None = None
    ) -> dict[str, Any]:
        """``nki.simulate`` vs this project's interpreter vs the device, on the same inputs.

        Writes ``out_dir/sim_vs_device/<stem>.json`` (max |difference| for every pair and each against
        the oracle) and returns it with ``"failures"``: which of the three miss the oracle's tolerance.
        """
        import numpy as np  # here: the job's own process has the standard library only

        kernel = device.load_kernel(case.kernel, self.api)
        ref = device.reference(case, args, kwargs)
        folder = os.path.join(out_dir, "sim_vs_device")
        os.makedirs(folder, exist_ok=True)
        outs = {
            "device": np.asarray(device_out, np.float64),
            "sdk_simulator": np.asarray(_first_output(official_simulate(kernel, args, kwargs)), np.float64),
            "interpreter": np.asarray(self._interpreter_output(case, seed, folder, timeout), np.float64),
        }
        rec: dict[str, Any] = {
            "kernel": case.kernel,
            "case": case.name,
            "seed": seed,
            "api": API,
            "max_abs_diff": {},
            "failures": {},
        }
        for a, o in outs.items():
            rec["max_abs_diff"][f"{a}_vs_oracle"] = float(np.max(np.abs(o - ref)))
            try:
                device.assert_close(o, ref, case.dtype, f"{case.case_id} ({a})")
            except AssertionError as e:
                rec["failures"][a] = str(e)
        for a, b in (("interpreter", "device"), ("sdk_simulator", "device"), ("interpreter", "sdk_simulator")):
            rec["max_abs_diff"][f"{a}_vs_{b}"] = float(np.max(np.abs(outs[a] - outs[b])))
        _write_json(os.path.join(folder, f"{stem(case)}.json"), rec)
        return rec

    def check_kernel(
        self,
        kernel: str,
        shape_set: str,
        out_dir: str,
        *,
        seed: int = DEFAULT_SEED,
        lnc: int = 1,
        use_torch: bool = True,
        sim_check: str = "auto",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Correctness of one kernel on every correctness case of ``shape_set``.

        Per case: the NumPy call vs the oracle; with ``use_torch``, the kernel inside a
        ``torch.nn.Module`` on XLA tensors vs torch on CPU; the simulator cross-check when ``sim_check``
        is ``"on"``, or ``"auto"`` and the SDK has ``nki.simulate``.  Writes
        ``out_dir/<kernel>.nki07.json``; ``"failed"`` counts failing checks (a missing torch or
        simulator when asked for counts as failing).
        """
        os.makedirs(out_dir, exist_ok=True)
        has_sim = callable(getattr(_nki(), "simulate", None))
        do_sim = sim_check == "on" or (sim_check == "auto" and has_sim)
        results, failed = [], 0
        for case in registry.select(kernel, shape_set, correctness=True):
            row: dict[str, Any] = {"case": case.name, "dtype": case.dtype, "checks": {}}
            t0 = time.time()
            try:
                args, kwargs, out = self.run_numpy(case, seed, lnc)
                ref = device.reference(case, args, kwargs)
                row["checks"]["numpy_call"] = {
                    "ok": True,
                    "max_abs_err": device.assert_close(out, ref, case.dtype, f"{case.case_id} (@nki.jit on NumPy)"),
                }
            except Exception as e:  # every failure is recorded, the run goes on
                row["checks"]["numpy_call"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                out = None
            if use_torch:
                try:
                    targs, tkwargs = device.make_inputs(case, seed)
                    module, inputs = torch_path.make_module(case.kernel, targs, tkwargs, api=self.api)
                    got = torch_path.run_on_device(module, *inputs)
                    want = torch_path.torch_reference(case.kernel, *targs, **tkwargs)
                    row["checks"]["torch_xla"] = {
                        "ok": True,
                        "max_abs_err": device.assert_close(
                            got, want, case.dtype, f"{case.case_id} (torch-neuronx vs torch CPU)"
                        ),
                    }
                except Exception as e:
                    row["checks"]["torch_xla"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            if do_sim and case.sim_ok():
                if not has_sim:
                    row["checks"]["sim_cross_check"] = {"ok": False, "error": "nki.simulate not in this SDK"}
                elif out is None:
                    row["checks"]["sim_cross_check"] = {"ok": False, "error": "no device output to compare"}
                else:
                    try:
                        rec = self.cross_check(case, out, args, kwargs, out_dir, seed, timeout)
                        row["checks"]["sim_cross_check"] = {
                            "ok": not rec["failures"],
                            "max_abs_diff": rec["max_abs_diff"],
                            "failures": rec["failures"],
                        }
                    except Exception as e:
                        row["checks"]["sim_cross_check"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            row["seconds"] = round(time.time() - t0, 3)
            bad = [k for k, v in row["checks"].items() if not v["ok"]]
            failed += len(bad)
            details = "".join(
                f"\n  {k}: {row['checks'][k].get('error') or row['checks'][k].get('failures')}" for k in bad
            )
            print(
                f"{case.case_id}: "
                + ", ".join(f"{k} {'ok' if v['ok'] else 'FAILED'}" for k, v in row["checks"].items())
                + details,
                flush=True,
            )
            results.append(row)
        record = {
            "kernel": kernel,
            "shapes": shape_set,
            "api": API,
            "seed": seed,
            "lnc": lnc,
            "kernel_impl": device.kernel_target(kernel, self.api),
            "simulator_cross_check": do_sim,
            "cases": results,
            "failed": failed,
            "utc": _utc(),
            "core": os.environ.get("NEURON_RT_VISIBLE_CORES"),
        }
        _write_json(os.path.join(out_dir, f"{kernel}.nki07.json"), record)
        return record

    def smoke(
        self, out_file: str, *, lnc: int = 1, module: str | None = None, junit: str | None = None
    ) -> dict[str, Any]:
        """Run every NKI 0.7 construct of the smoke module on the device against NumPy.

        ``module`` (default ``$NKI_HW_SMOKE_MODULE`` or ``nki_kernels.kernels.smoke_nki07``) exposes
        ``CONSTRUCTS``: objects with ``name``, ``used_by``, ``flag``, ``kernel``, ``inputs()`` and
        ``reference(*inputs)``.  Writes ``out_file``; ``"failed"`` lists the failing constructs.
        """
        import numpy as np  # here: the job's own process has the standard library only

        mod = importlib.import_module(module or os.environ.get("NKI_HW_SMOKE_MODULE", SMOKE_MODULE))
        rows, failed = [], []
        for c in mod.CONSTRUCTS:
            args = c.inputs()
            row: dict[str, Any] = {"name": c.name, "used_by": c.used_by, "flag": c.flag}
            try:
                out = _first_output(launch(c.kernel, lnc)(*args))
                row["max_abs_err"] = device.assert_close(
                    out, c.reference(*[np.asarray(a) for a in args]), c.dtype, c.name
                )
                row["ok"] = True
            except Exception as e:
                row.update(ok=False, error=f"{type(e).__name__}: {e}")
                failed.append(c.name)
            rows.append(row)
            print(
                f"construct {c.name}: {'ok' if row['ok'] else 'FAILED'}"
                + (
                    ""
                    if row["ok"]
                    else f" -- {row['error']}\n  used by {c.used_by}"
                    + (f"; avoid it with {c.flag}" if c.flag else "; no flag avoids it")
                ),
                flush=True,
            )
        record = {
            "api": API,
            "module": mod.__name__,
            "constructs": rows,
            "failed": failed,
            "utc": _utc(),
            "core": os.environ.get("NEURON_RT_VISIBLE_CORES"),
        }
        os.makedirs(os.path.dirname(os.path.abspath(out_file)), exist_ok=True)
        _write_json(out_file, record)
        if junit:
            write_junit(junit, "smoke_nki07", rows)
        return record

    # -- CLI
    def add_subcommands(self, sub: Any) -> None:
        p = sub.add_parser("smoke", help="run the NKI 0.7 construct smoke test on the device")
        p.add_argument("--out", required=True, help="JSON report file")
        p.add_argument("--junitxml", default=None, help="also write a JUnit XML report")
        p.add_argument("--lnc", type=int, choices=(1, 2), default=1)
        p = sub.add_parser("check", help="correctness of one kernel: NumPy call, torch-xla, simulator cross-check")
        p.add_argument("--kernel", required=True, choices=registry.KERNELS)
        p.add_argument("--shapes", default="quick", choices=registry.HW_SETS)
        p.add_argument("--out", required=True, help="folder for <kernel>.nki07.json and sim_vs_device/")
        p.add_argument("--seed", type=int, default=DEFAULT_SEED)
        p.add_argument("--lnc", type=int, choices=(1, 2), default=1)
        p.add_argument("--no-torch", action="store_true", help="skip the torch-neuronx check")
        p.add_argument(
            "--sim-check",
            choices=("auto", "on", "off"),
            default="auto",
            help="nki.simulate vs interpreter vs device (auto: when nki.simulate exists)",
        )
        p.add_argument("--timeout", type=float, default=None, help="seconds for each subprocess")

    def add_bench_options(self, p: argparse.ArgumentParser) -> None:
        super().add_bench_options(p)
        p.add_argument("--lnc", type=int, choices=(1, 2), default=1)
        p.add_argument("--tool", default=PROFILER, help="profiler executable (default neuron-explorer)")
        p.add_argument("--timeout", type=float, default=None, help="seconds for each profiler call")

    def run_subcommand(self, a: argparse.Namespace) -> int:
        if a.cmd == "smoke":
            rec = self.smoke(a.out, lnc=a.lnc, junit=a.junitxml)
            if rec["failed"]:
                print(
                    f"smoke test: {len(rec['failed'])} construct(s) failed: {', '.join(rec['failed'])} "
                    f"(details in {a.out})",
                    file=sys.stderr,
                )
                return 1
            print(f"smoke test: all {len(rec['constructs'])} constructs ok")
            return 0
        rec = self.check_kernel(
            a.kernel,
            a.shapes,
            a.out,
            seed=a.seed,
            lnc=a.lnc,
            use_torch=not a.no_torch,
            sim_check=a.sim_check,
            timeout=a.timeout,
        )
        print(f"{a.kernel}: {len(rec['cases'])} cases, {rec['failed']} failed check(s)")
        return 1 if rec["failed"] or not rec["cases"] else 0

    def bench_report(self, case: Case, a: argparse.Namespace) -> int:
        rec = self.bench_case(
            case, a.out, warmup=a.warmup, iters=a.iters, seed=a.seed, tool=a.tool, lnc=a.lnc, timeout=a.timeout
        )
        cs = rec["cs149"]
        print(
            f"{case.case_id}: p50 {rec['p50_us']:.1f} us, p99 {rec['p99_us']:.1f} us "
            f"(warmup {rec['warmup']}, iters {rec['iters']}, core {rec['core']}, {API})"
            + (f"; CS149: {cs['verdict']}" if cs else "")
            + ("" if rec["first_call"]["ok"] else f"; FIRST CALL WRONG: {rec['first_call']['error']}")
        )
        return 0 if rec["first_call"]["ok"] else 1


NKI07 = Nki07Path()
bench_case = NKI07.bench_case
check_kernel = NKI07.check_kernel
smoke = NKI07.smoke
estimate_case = NKI07.estimate_case
simulate_case = NKI07.simulate_case
main = NKI07.main

if __name__ == "__main__":
    sys.exit(main())
