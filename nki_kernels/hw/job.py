"""Per-case jobs run by ``scripts/run_hw.sh`` (and usable by hand).

    python -m nki_kernels.hw.job bench    --kernel conv2d --case NAME --out DIR [--warmup 10 --iters 100]
    python -m nki_kernels.hw.job estimate --kernel conv2d --case NAME --out DIR
    python -m nki_kernels.hw.job simulate --kernel conv2d --case NAME --out FILE.npy

``bench`` needs a NeuronCore (``NEURON_RT_VISIBLE_CORES`` picks it): it runs
``nki.benchmark``, keeps the NEFF as ``DIR/<kernel>_<case>.neff`` and writes
``DIR/bench.json`` (p0..p100, warmup, iters, SDK versions, core id, the CS149 thresholds
and the ratio to the cost-model estimate when ``DIR/<kernel>_<case>.estimate.json``
exists).  ``estimate`` runs the cost model on the NumPy interpreter (CPU only; it forces
``NKI_BACKEND=sim``).  ``simulate`` saves the interpreter's output for the same seeded
inputs, for simulator-vs-device diffs.  Hardware numbers are reported, never asserted.
"""
from __future__ import annotations

import argparse
import datetime as _dt
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
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


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


def estimate_case(case: shapes.Case, out_dir: str, seed: int = DEFAULT_SEED) -> dict:
    """Cost-model estimates on the interpreter; writes ``<stem>.estimate.json`` (+ trace).

    Two estimates, timing only (``numerics=False``): ``mode="benchmark"`` gives
    ``latency_us``, compared with nki.benchmark; ``mode="profile"`` gives ``summary``
    (neuron-profile field names) and the Chrome trace, compared with the capture.
    """
    os.environ["NKI_BACKEND"] = "sim"  # before any kernel module import
    from nki_kernels.perf import estimate  # noqa: PLC0415

    from . import device  # noqa: PLC0415
    os.makedirs(out_dir, exist_ok=True)
    args, kwargs = device.make_inputs(case, seed)
    kernel = device.load_kernel(case.kernel)
    bench = estimate(kernel, *args, mode="benchmark", numerics=False, **kwargs)
    prof = estimate(kernel, *args, mode="profile", numerics=False, **kwargs)
    record = {
        "kernel": case.kernel, "case": case.name, "params": case.p, "dtype": case.dtype,
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
    """Run the case on the project's interpreter and save the output as ``.npy``."""
    os.environ["NKI_BACKEND"] = "sim"
    import numpy as np  # noqa: PLC0415

    from nki_kernels.sim import simulate_kernel  # noqa: PLC0415

    from . import device  # noqa: PLC0415
    args, kwargs = device.make_inputs(case, seed)
    out = simulate_kernel(device.load_kernel(case.kernel), *args, **kwargs)
    np.save(out_file, np.asarray(out, dtype=np.float64))
    return out_file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nki_kernels.hw.job", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("bench", "estimate", "simulate"):
        p = sub.add_parser(name)
        p.add_argument("--kernel", required=True, choices=shapes.KERNELS)
        p.add_argument("--case", required=True, help="case name (see nki_kernels/hw/shapes.py)")
        p.add_argument("--out", required=True, help="output folder (bench/estimate) or .npy file (simulate)")
        p.add_argument("--seed", type=int, default=DEFAULT_SEED)
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
    if a.cmd == "bench":
        rec = bench_case(case, a.out, warmup=a.warmup, iters=a.iters, seed=a.seed, compile_opt=a.compile_opt)
        cs = rec["cs149"]
        print(f"{case.case_id}: p50 {rec['p50_us']:.1f} us, p99 {rec['p99_us']:.1f} us "
              f"(warmup {rec['warmup']}, iters {rec['iters']}, core {rec['core']})"
              + (f"; CS149: {cs['verdict']}" if cs else ""))
    elif a.cmd == "estimate":
        rec = estimate_case(case, a.out, a.seed)
        print(f"{case.case_id}: estimated {rec['latency_us']:.1f} us (cost model, not measured)")
    else:
        print(simulate_case(case, a.out, a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
