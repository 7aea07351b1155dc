"""The one protocol of the hardware job, implemented once per NKI generation.

:class:`HwPath` is what ``nki_kernels.hw.run`` (the job) asks of an SDK path, and what the job's
step processes run inside the Neuron venv:

- **the commands** of each step, as the job runs them: ``smoke_step`` (the construct smoke test,
  first), ``check_step`` (correctness of one kernel), ``bench_step`` (latency of one case, keeping
  its NEFF), ``estimate_step`` (the cost model on this project's interpreter) and the profiler's
  ``capture`` flags (``capture_args``, ``after_capture``);
- **the step bodies**, ``python -m <module> bench|estimate|simulate|...``: :meth:`HwPath.bench_case`
  is the generation's own; :meth:`HwPath.estimate_here` and :meth:`HwPath.simulate_here` are shared,
  run on the interpreter with this generation's import alias.

Implementations: ``nki_kernels.hw.job.Nki01Path`` (SDK 2.26/2.27, ``neuronxcc.nki``,
``nki.benchmark``, ``neuron-profile``) and ``nki_kernels.hw.nki07_path.Nki07Path`` (SDK >= 2.33,
``import nki``, profiled executions, ``neuron-explorer``).  Importing this module needs neither the
SDK nor torch nor NumPy.  Hardware numbers are recorded, never asserted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import errno
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nki_kernels.kernels import registry
from nki_kernels.kernels.registry import Case

from . import device

DEFAULT_SEED = 0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------------------- records
def stem(case: Case) -> str:
    """``<kernel>_<case>``: the file stem of a case's NEFF, NTFF, summaries and estimate."""
    return f"{case.kernel}_{case.name}"


def utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path: str, obj: Any) -> None:
    """Atomic write (temporary file + rename); on failure (disk full, ...) no temporary file is left."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def cs149_verdict(p99_us: float, thresholds: Sequence[float] | None) -> dict[str, Any] | None:
    """Where a p99 falls against the CS149 (relaxed, optimized) thresholds; None if none apply."""
    if not thresholds:
        return None
    relaxed, optimized = thresholds
    if p99_us <= optimized:
        verdict = "meets optimized threshold"
    elif p99_us <= relaxed:
        verdict = "meets relaxed threshold only"
    else:
        verdict = "above relaxed threshold"
    return {
        "relaxed_us": relaxed,
        "optimized_us": optimized,
        "p99_us": p99_us,
        "ratio_to_optimized": p99_us / optimized,
        "verdict": verdict,
    }


def estimate_ratio(p50_us: float, p99_us: float, estimate_path: str) -> dict[str, Any] | None:
    """Measured / estimated latency from an ``estimate`` record, or None when absent."""
    if not os.path.exists(estimate_path):
        return None
    with open(estimate_path, encoding="utf-8") as f:
        est = json.load(f)
    lat = est.get("latency_us")
    if not lat:
        return {"estimate_file": os.path.basename(estimate_path), "error": "no latency_us in estimate"}
    return {
        "estimate_file": os.path.basename(estimate_path),
        "estimated_latency_us": lat,
        "ratio_p50": p50_us / lat,
        "ratio_p99": p99_us / lat,
    }


def _trace_from(est: Any) -> Any:
    """The estimate's Chrome-trace JSON object, if the cost model offers one."""
    fn = getattr(est, "chrome_trace", None)
    if not callable(fn):
        return None
    trace = fn()
    return json.loads(trace) if isinstance(trace, str) else trace


def _profile_fields(est: Any) -> Any:
    """The estimate as neuron-profile summary fields (``total_time`` in seconds, ...)."""
    fn = getattr(est, "summary_dict", None)
    if callable(fn):
        return fn()
    from nki_kernels.perf.report import profile_fields  # here: the job's own process has the standard library only

    return profile_fields(est)


# ------------------------------------------------------------------------------- the job's side
@dataclass(frozen=True)
class Step:
    """One command of the job: what the manifest records and the job runs (``env K=V ... cmd``).

    ``stdout``: a file for the command's standard output (else it goes to the step's log);
    ``core``: the NeuronCore it holds ("" for CPU-only steps)."""

    name: str
    phase: str
    argv: tuple[str, ...]
    cwd: str
    kernel: str = ""
    case: str = ""
    core: str = ""
    stdout: str = ""


@dataclass(frozen=True)
class StepContext:
    """What every step command needs: the venv's python, PYTHONPATH (this checkout first), the run
    folder, the options."""

    python: str
    pythonpath: str
    run: str
    shapes: str
    timeout: int
    warmup: int
    iters: int
    constructs_test: str
    extra: dict[str, str] = field(default_factory=dict)


def env_argv(env: dict[str, str], *cmd: str) -> tuple[str, ...]:
    """``env K=V ... cmd``: the environment of a step is part of its recorded command."""
    return ("env", *(f"{k}={v}" for k, v in env.items()), *cmd)


class HwPath:
    """One SDK path of the hardware job (see the module docstring)."""

    name: ClassVar[str]  # "nki01" | "nki07": sdk.py's decision
    api: ClassVar[str]  # "0.1" | "0.7": the registry's entry point
    label: ClassVar[str]  # "nki-0.1" | "nki-0.7": bench.json "api"
    module: ClassVar[str]  # the step module: python -m <module> bench|estimate|simulate ...
    profiler: ClassVar[str]  # neuron-profile | neuron-explorer
    capture_args: ClassVar[tuple[str, ...]] = ()
    device_env: ClassVar[dict[str, str]] = {}  # every device step's environment
    bench_env: ClassVar[dict[str, str]] = {}  # the bench step's, on top
    executed_by: ClassVar[str]  # estimate records: how the interpreter ran the kernel

    # -- commands (the job's side; nothing here imports the SDK)
    def has_smoke_test(self, ctx: StepContext) -> bool:
        raise NotImplementedError

    def smoke_step(self, ctx: StepContext, core: str) -> Step:
        raise NotImplementedError

    def check_step(self, ctx: StepContext, kernel: str, core: str) -> Step:
        raise NotImplementedError

    def bench_step(self, ctx: StepContext, case: Case, out_dir: str, core: str) -> Step:
        argv = env_argv(
            {"NEURON_RT_VISIBLE_CORES": core, **self.device_env, **self.bench_env, "PYTHONPATH": ctx.pythonpath},
            ctx.python,
            "-m",
            self.module,
            "bench",
            "--kernel",
            case.kernel,
            "--case",
            case.name,
            "--out",
            out_dir,
            "--warmup",
            str(ctx.warmup),
            "--iters",
            str(ctx.iters),
        )
        return Step(f"bench-{stem(case)}", "bench", argv, out_dir, case.kernel, case.name, core)

    def estimate_step(self, ctx: StepContext, case: Case, out_dir: str) -> Step:
        """The cost model on the interpreter; the kernel (yours too, via ``NKI_HW_KERNEL_<NAME>``) is
        imported in the step's own process with this generation's NKI aliased to the interpreter."""
        argv = env_argv(
            {"NKI_BACKEND": "sim", "PYTHONPATH": ctx.pythonpath},
            ctx.python,
            "-m",
            self.module,
            "estimate",
            "--kernel",
            case.kernel,
            "--case",
            case.name,
            "--out",
            out_dir,
        )
        return Step(f"estimate-{stem(case)}", "estimate", argv, ROOT, case.kernel, case.name)

    def after_capture(self, folder: str, case_stem: str) -> None:
        """Rename what the capture wrote to ``<stem>.ntff`` when the tool names it otherwise."""

    # -- step bodies (inside the venv)
    def bench_case(
        self, case: Case, out_dir: str, *, warmup: int, iters: int, seed: int = DEFAULT_SEED, **options: Any
    ) -> dict[str, Any]:
        raise NotImplementedError

    def interpreter(self) -> Any:
        """A context manager: this process runs this generation's kernels on the interpreter."""
        raise NotImplementedError

    def estimate_here(self, case: Case, out_dir: str, seed: int = DEFAULT_SEED) -> dict[str, Any]:
        """Cost-model estimates on the interpreter, in this process; writes ``<stem>.estimate.json``
        (+ ``<stem>.estimate.trace.json``).

        Two estimates, timing only (``numerics=False``): ``mode="benchmark"`` gives ``latency_us``,
        compared with the measured latency; ``mode="profile"`` gives ``summary`` (neuron-profile
        field names) and the Chrome trace, compared with the capture.
        """
        with self.interpreter():
            from nki_kernels.perf import estimate  # here: the job's own process has the standard library only

            os.makedirs(out_dir, exist_ok=True)
            args, kwargs = device.make_inputs(case, seed)
            kernel = device.load_kernel(case.kernel, self.api)
            bench = estimate(kernel, *args, mode="benchmark", numerics=False, **kwargs)
            prof = estimate(kernel, *args, mode="profile", numerics=False, **kwargs)
        record = {
            "kernel": case.kernel,
            "case": case.name,
            "params": case.p,
            "dtype": case.dtype,
            "api": self.label,
            "kernel_impl": device.kernel_target(case.kernel, self.api),
            "executed_by": self.executed_by,
            "latency_us": bench.latency_us,
            "profile_latency_us": prof.latency_us,
            "mfu": bench.mfu,
            "flops": bench.flops,
            "hbm_bytes": bench.hbm_bytes,
            "dma_count": bench.dma_count,
            "engine_busy_us": dict(bench.engine_busy_us),
            "summary": _profile_fields(prof),
            "utc": utc(),
            "note": "cost-model estimate, not a measurement",
        }
        trace = _trace_from(prof)
        if trace is not None:
            trace_name = f"{stem(case)}.estimate.trace.json"
            write_json(os.path.join(out_dir, trace_name), trace)
            record["trace"] = trace_name
        write_json(os.path.join(out_dir, f"{stem(case)}.estimate.json"), record)
        return record

    def simulate_here(self, case: Case, out_file: str, seed: int = DEFAULT_SEED) -> str:
        """The interpreter's output for the case's seeded inputs, saved as ``.npy`` (this process)."""
        with self.interpreter():
            import numpy as np  # here: the job's own process has the standard library only

            from nki_kernels.sim import simulate_kernel  # here: the job's own process has the standard library only

            args, kwargs = device.make_inputs(case, seed)
            kernel = device.load_kernel(case.kernel, self.api)
            if self.api == "0.7":
                out = kernel(*args, **kwargs)
                out = out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out
            else:
                out = simulate_kernel(kernel, *args, **kwargs)
            np.save(out_file, np.asarray(out, dtype=np.float64))
        return out_file

    def in_subprocess(self, cmd: str, case: Case, out: str, seed: int, timeout: float | None = None) -> None:
        """``python -m <module> CMD`` for one case in a fresh interpreter process (a kernel module binds
        its NKI at import; the real SDK's objects never meet the interpreter's)."""
        env = dict(os.environ, NKI_BACKEND="sim")
        env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                self.module,
                cmd,
                "--kernel",
                case.kernel,
                "--case",
                case.name,
                "--out",
                out,
                "--seed",
                str(seed),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(
                f"{self.module.rsplit('.', 1)[-1]} {cmd} {case.case_id} failed (exit {proc.returncode}): {tail[0]}"
            )

    def estimate_case(self, case: Case, out_dir: str, seed: int = DEFAULT_SEED) -> dict[str, Any]:
        """:meth:`estimate_here` in a fresh interpreter process; returns the record it wrote."""
        self.in_subprocess("estimate", case, out_dir, seed)
        with open(os.path.join(out_dir, f"{stem(case)}.estimate.json"), encoding="utf-8") as f:
            return json.load(f)

    def simulate_case(self, case: Case, out_file: str, seed: int = DEFAULT_SEED) -> str:
        """:meth:`simulate_here` in a fresh interpreter process."""
        self.in_subprocess("simulate", case, out_file, seed)
        return out_file

    # -- the step CLI: python -m <module> ...
    def add_subcommands(self, sub: Any) -> None:
        """Subcommands beyond bench / estimate / simulate (the 0.7 path's smoke and check)."""

    def add_bench_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--warmup", type=int, default=10)
        p.add_argument("--iters", type=int, default=100)

    def run_subcommand(self, a: argparse.Namespace) -> int:
        """A subcommand added by :meth:`add_subcommands` (exit code)."""
        raise NotImplementedError

    def bench_report(self, case: Case, a: argparse.Namespace) -> int:
        """Run ``bench`` for the CLI; print one line; exit code."""
        raise NotImplementedError

    def main(self, argv: list[str] | None = None) -> int:
        """``python -m <module> bench|estimate|simulate ...`` (and the path's own subcommands)."""
        ap = argparse.ArgumentParser(
            prog=f"python -m {self.module}",
            description=f"The NKI {self.api} hardware steps (scripts/run_hw.sh runs them).",
        )
        sub = ap.add_subparsers(dest="cmd", required=True)
        self.add_subcommands(sub)
        for name in ("bench", "estimate", "simulate"):
            p = sub.add_parser(name)
            p.add_argument("--kernel", required=True, choices=registry.KERNELS)
            p.add_argument(
                "--case", required=True, help="case name (python -m nki_kernels.kernels.registry --set hw-full)"
            )
            p.add_argument("--out", required=True, help="output folder (bench/estimate) or .npy file (simulate)")
            p.add_argument("--seed", type=int, default=DEFAULT_SEED)
            if name == "bench":
                self.add_bench_options(p)
        a = ap.parse_args(argv)
        if getattr(a, "warmup", 0) < 0 or getattr(a, "iters", 1) < 1:
            ap.error(f"--warmup must be >= 0 and --iters >= 1, got {a.warmup} and {a.iters}")
        try:
            if a.cmd not in ("bench", "estimate", "simulate"):
                return self.run_subcommand(a)
            try:
                case = registry.get_case(a.kernel, a.case)
            except KeyError as e:
                print(f"{self.module.rsplit('.', 1)[-1]}: {e.args[0]}", file=sys.stderr)
                return 2
            if a.cmd == "bench":
                return self.bench_report(case, a)
            if a.cmd == "estimate":
                rec = self.estimate_here(case, a.out, a.seed)
                print(f"{case.case_id}: estimated {rec['latency_us']:.1f} us (cost model, not measured; {self.label})")
                return 0
            print(self.simulate_here(case, a.out, a.seed))
            return 0
        except OSError as e:  # disk full, unwritable --out: one line, no traceback
            if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
                raise
            print(f"{a.cmd}: cannot write {e.filename or a.out}: {e.strerror or e}", file=sys.stderr)
            return 1
