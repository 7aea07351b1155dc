"""Per-case jobs run by ``scripts/run_hw.sh`` (and usable by hand).

    python -m nki_kernels.hw.job bench    --kernel conv2d --case NAME --out DIR [--warmup 10 --iters 100]
    python -m nki_kernels.hw.job estimate --kernel conv2d --case NAME --out DIR
    python -m nki_kernels.hw.job simulate --kernel conv2d --case NAME --out FILE.npy

``bench`` needs a NeuronCore (``NEURON_RT_VISIBLE_CORES`` picks it): it runs
``nki.benchmark``, keeps the NEFF as ``DIR/<kernel>_<case>.neff`` and writes
``DIR/bench.json`` (p0..p100, warmup, iters, SDK versions, core id, the CS149 thresholds
and the ratio to the cost-model estimate when ``DIR/<kernel>_<case>.estimate.json``
exists).  ``estimate`` runs the cost model on the NumPy interpreter (CPU only) and
``simulate`` saves the interpreter's output for the same seeded inputs (simulator-vs-device
diffs); both import the kernel -- yours too, via ``NKI_HW_KERNEL_<NAME>`` -- with
``neuronxcc.nki`` aliased to the interpreter, in a process of their own, so they work on a
laptop and never mix the real SDK's objects with the interpreter's.  Hardware numbers are reported, never asserted.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import errno
import json
import os
import sys

from . import shapes

DEFAULT_SEED = 0


def stem(case: shapes.Case) -> str:
    return f"{case.kernel}_{case.name}"


def _utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_json(path: str, obj) -> None:
    """Atomic write; on failure (disk full, ...) no temporary file is left behind."""
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


def cs149_verdict(p99_us: float, thresholds) -> dict | None:
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
    return {"relaxed_us": relaxed, "optimized_us": optimized, "p99_us": p99_us,
            "ratio_to_optimized": p99_us / optimized, "verdict": verdict}


def estimate_ratio(p50_us: float, p99_us: float, estimate_path: str) -> dict | None:
    """Measured / estimated latency from a ``job estimate`` record, or None when absent."""
    if not os.path.exists(estimate_path):
        return None
    with open(estimate_path, encoding="utf-8") as f:
        est = json.load(f)
    lat = est.get("latency_us")
    if not lat:
        return {"estimate_file": os.path.basename(estimate_path), "error": "no latency_us in estimate"}
    return {"estimate_file": os.path.basename(estimate_path), "estimated_latency_us": lat,
            "ratio_p50": p50_us / lat, "ratio_p99": p99_us / lat}


def bench_case(case: shapes.Case, out_dir: str, *, warmup: int, iters: int,
               seed: int = DEFAULT_SEED, compile_opt: str | None = None) -> dict:
    """Benchmark one case on the device and write ``out_dir/bench.json``; returns the record."""
    from . import device, env  # noqa: PLC0415
    os.makedirs(out_dir, exist_ok=True)
    args, kwargs = device.make_inputs(case, seed)
    kernel = device.load_kernel(case.kernel)
    neff = f"{stem(case)}.neff"
    cwd = os.getcwd()
    os.chdir(out_dir)  # nki.benchmark writes save_neff_name relative to the working directory
    try:
        lat = device.run_benchmark(kernel, args, kwargs, warmup=warmup, iters=iters,
                                   save_neff_name=neff, additional_compile_opt=compile_opt)
    finally:
        os.chdir(cwd)
    record = {
        "kernel": case.kernel, "case": case.name, "params": case.p, "dtype": case.dtype,
        "seed": seed, "warmup": lat.warmup, "iters": lat.iters,
        "latency_us": lat.percentiles_us, "p50_us": lat.p50, "p99_us": lat.p99,
        "kernel_impl": device.kernel_target(case.kernel),
        "additional_compile_opt": compile_opt,
        "core": os.environ.get("NEURON_RT_VISIBLE_CORES"),
        "instance_type": env.instance_type(), "sdk": env.sdk_info(),
        "neff": neff if os.path.exists(os.path.join(out_dir, neff)) else None,
        "cs149": cs149_verdict(lat.p99, case.threshold_us),
        "vs_estimate": estimate_ratio(lat.p50, lat.p99,
                                      os.path.join(out_dir, f"{stem(case)}.estimate.json")),
        "utc": _utc(),
        "note": "measured with nki.benchmark; thresholds and estimate ratios are reported, not asserted",
    }
    _write_json(os.path.join(out_dir, "bench.json"), record)
    return record


def _trace_from(est):
    """The estimate's Chrome-trace JSON object, if the cost model offers one."""
    fn = getattr(est, "chrome_trace", None)
    if not callable(fn):
        return None
    trace = fn()
    return json.loads(trace) if isinstance(trace, str) else trace


def _profile_fields(est) -> dict:
    """The estimate as neuron-profile summary fields (``total_time`` in seconds, ...)."""
    fn = getattr(est, "summary_dict", None)
    if callable(fn):
        return fn()
    from nki_kernels.perf.report import profile_fields  # noqa: PLC0415
    return profile_fields(est)


def _interpreter_alias():
    """Make ``import neuronxcc.nki`` resolve to the project's interpreter in this process.

    Run only in a fresh process (``python -m nki_kernels.hw.job estimate|simulate``): a user's
    kernel module (``NKI_HW_KERNEL_<NAME>``, e.g. a CS149 ``conv2d.py``) imports ``neuronxcc``
    itself, so without the alias it fails on a laptop, and on a trn2 it would hand the real
    SDK's ``nki.jit`` objects to the interpreter.  Refuses if the real SDK is already loaded.
    """
    os.environ["NKI_BACKEND"] = "sim"  # before any kernel module import
    from nki_kernels.sim import alias_installed, install_neuronxcc_alias  # noqa: PLC0415
    if "neuronxcc" in sys.modules and not alias_installed():
        raise RuntimeError("the real neuronxcc is already imported in this process; the interpreter "
                           "runs kernels only in a fresh one (use job.estimate_case / job.simulate_case)")
    return install_neuronxcc_alias()


def _in_subprocess(cmd: str, case: shapes.Case, out: str, seed: int) -> None:
    """Run ``python -m nki_kernels.hw.job CMD`` for one case in a fresh interpreter process."""
    import subprocess  # noqa: PLC0415
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, NKI_BACKEND="sim")
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, "-m", "nki_kernels.hw.job", cmd, "--kernel", case.kernel,
                           "--case", case.name, "--out", out, "--seed", str(seed)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"job {cmd} {case.case_id} failed (exit {proc.returncode}): {tail[0]}")


def estimate_case(case: shapes.Case, out_dir: str, seed: int = DEFAULT_SEED) -> dict:
    """Cost-model estimates of a case, computed in a fresh interpreter process (see ``_estimate_here``)."""
    _in_subprocess("estimate", case, out_dir, seed)
    with open(os.path.join(out_dir, f"{stem(case)}.estimate.json"), encoding="utf-8") as f:
        return json.load(f)


def _estimate_here(case: shapes.Case, out_dir: str, seed: int = DEFAULT_SEED) -> dict:
    """Cost-model estimates on the interpreter; writes ``<stem>.estimate.json`` (+ trace).

    Two estimates, timing only (``numerics=False``): ``mode="benchmark"`` gives
    ``latency_us``, compared with nki.benchmark; ``mode="profile"`` gives ``summary``
    (neuron-profile field names) and the Chrome trace, compared with the capture.
    The kernel is imported under the interpreter alias (``_interpreter_alias``).
    """
    with _interpreter_alias():
        from nki_kernels.perf import estimate  # noqa: PLC0415

        from . import device  # noqa: PLC0415
        os.makedirs(out_dir, exist_ok=True)
        args, kwargs = device.make_inputs(case, seed)
        kernel = device.load_kernel(case.kernel)
        bench = estimate(kernel, *args, mode="benchmark", numerics=False, **kwargs)
        prof = estimate(kernel, *args, mode="profile", numerics=False, **kwargs)
    record = {
        "kernel": case.kernel, "case": case.name, "params": case.p, "dtype": case.dtype,
        "kernel_impl": device.kernel_target(case.kernel),
        "executed_by": "nki_kernels.sim (interpreter, neuronxcc alias)",
        "latency_us": bench.latency_us, "profile_latency_us": prof.latency_us,
        "mfu": bench.mfu, "flops": bench.flops, "hbm_bytes": bench.hbm_bytes,
        "dma_count": bench.dma_count, "engine_busy_us": dict(bench.engine_busy_us),
        "summary": _profile_fields(prof), "utc": _utc(),
        "note": "cost-model estimate, not a measurement",
    }
    trace = _trace_from(prof)
    if trace is not None:
        trace_name = f"{stem(case)}.estimate.trace.json"
        _write_json(os.path.join(out_dir, trace_name), trace)
        record["trace"] = trace_name
    _write_json(os.path.join(out_dir, f"{stem(case)}.estimate.json"), record)
    return record


def simulate_case(case: shapes.Case, out_file: str, seed: int = DEFAULT_SEED) -> str:
    """The interpreter's output for the case's seeded inputs, saved as ``.npy`` (fresh process)."""
    _in_subprocess("simulate", case, out_file, seed)
    return out_file


def _simulate_here(case: shapes.Case, out_file: str, seed: int = DEFAULT_SEED) -> str:
    with _interpreter_alias():
        import numpy as np  # noqa: PLC0415

        from nki_kernels.sim import simulate_kernel  # noqa: PLC0415

        from . import device  # noqa: PLC0415
        args, kwargs = device.make_inputs(case, seed)
        out = simulate_kernel(device.load_kernel(case.kernel), *args, **kwargs)
        np.save(out_file, np.asarray(out, dtype=np.float64))
    return out_file


def add_case_parser(sub, name: str) -> argparse.ArgumentParser:
    """The per-case subcommand (bench / estimate / simulate) with the arguments every SDK path shares."""
    p = sub.add_parser(name)
    p.add_argument("--kernel", required=True, choices=shapes.KERNELS)
    p.add_argument("--case", required=True, help="case name (see nki_kernels/hw/shapes.py)")
    p.add_argument("--out", required=True, help="output folder (bench/estimate) or .npy file (simulate)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nki_kernels.hw.job", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("bench", "estimate", "simulate"):
        p = add_case_parser(sub, name)
        if name == "bench":
            p.add_argument("--warmup", type=int, default=10)
            p.add_argument("--iters", type=int, default=100)
            p.add_argument("--compile-opt", default=None,
                           help="additional_compile_opt for nki.benchmark, e.g. --disable-dge")
    a = ap.parse_args(argv)
    try:
        case = shapes.get_case(a.kernel, a.case)
    except KeyError as e:
        print(f"job: {e.args[0]}", file=sys.stderr)
        return 2
    try:
        return _run(a, case)
    except OSError as e:  # disk full, unwritable --out: one line, no traceback
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
            raise
        print(f"job {a.cmd}: cannot write {e.filename or a.out}: {e.strerror or e}", file=sys.stderr)
        return 1


def _run(a, case) -> int:
    if a.cmd == "bench":
        rec = bench_case(case, a.out, warmup=a.warmup, iters=a.iters, seed=a.seed, compile_opt=a.compile_opt)
        cs = rec["cs149"]
        print(f"{case.case_id}: p50 {rec['p50_us']:.1f} us, p99 {rec['p99_us']:.1f} us "
              f"(warmup {rec['warmup']}, iters {rec['iters']}, core {rec['core']})"
              + (f"; CS149: {cs['verdict']}" if cs else ""))
    elif a.cmd == "estimate":
        rec = _estimate_here(case, a.out, a.seed)
        print(f"{case.case_id}: estimated {rec['latency_us']:.1f} us (cost model, not measured)")
    else:
        print(_simulate_here(case, a.out, a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
