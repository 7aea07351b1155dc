"""``nki-kernels`` command line.

  verify      run every kernel in the simulator on representative shapes (incl. CS149)
              against its NumPy oracle; print errors, pass/fail, wall time, estimates
  run FILE    run a Python file with `neuronxcc.nki` (NKI 0.1) or `nki` (NKI 0.7, picked from the
              file's imports or --api) resolving to the interpreter
              (--strict, --shuffle SEED, --no-poison, --precision; --estimate-benchmark)
  conformance PATH   run the SDK's nki/test examples (a local aws-neuron-sdk checkout) in the interpreter
  sim-bench   the interpreter's own speed (per-instruction overhead, matmul loop)
  profile / bench / roofline   cost-model estimates (see docs/cost-model.md)
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time


def _verify_cases(quick: bool):
    import numpy as np
    from nki_kernels import oracles
    rng = np.random.default_rng(0)

    def arr(shape, dtype):
        return rng.standard_normal(shape).astype(dtype)

    cases = []
    try:
        from nki_kernels.kernels.conv2d import fused_conv2d_maxpool as conv
        conv_shapes = [  # (B, C_in, C_out, H, W, K, pool, dtype, label)
            (4, 128, 128, 32, 16, 3, 1, "float32", "CS149 small"),
            (4, 256, 256, 32, 16, 3, 2, "float32", "CS149 small, pool 2"),
            (1, 3, 64, 20, 20, 5, 2, "float16", "C_in 3, 5x5"),
            (1, 129, 130, 12, 600, 3, 1, "bfloat16", "partial tiles, wide rows"),
        ]
        if not quick:
            conv_shapes.append((4, 256, 256, 224, 224, 3, 1, "float32", "CS149 large"))
        for B, C, O, H, Wd, K, p, d, label in conv_shapes:
            cases.append(("conv2d+bias+maxpool", f"B{B} {C}->{O} {H}x{Wd} k{K} pool{p} ({label})", d, conv,
                          lambda B=B, C=C, O=O, H=H, Wd=Wd, K=K, p=p, d=d: (
                              (arr((B, C, H, Wd), _np_dtype(d)), arr((O, C, K, K), _np_dtype(d)) / (3 * K),
                               arr((O,), _np_dtype(d))), {"pool_size": p}),
                          oracles.conv2d_maxpool_ref))
    except ImportError as e:
        cases.append(("conv2d+bias+maxpool", "-", "-", None, str(e), None))
    try:
        from nki_kernels.kernels.matmul import matmul
        for K, M, N, d in [(512, 256, 1024, "float32"), (1000, 300, 700, "bfloat16"), (129, 1, 513, "float16")] + \
                ([] if quick else [(2048, 2048, 2048, "float32")]):
            cases.append(("matmul", f"K{K} M{M} N{N}", d, matmul,
                          lambda K=K, M=M, N=N, d=d: ((arr((K, M), _np_dtype(d)), arr((K, N), _np_dtype(d))), {}),
                          oracles.matmul_ref))
    except ImportError as e:
        cases.append(("matmul", "-", "-", None, str(e), None))
    try:
        from nki_kernels.kernels.attention import flash_attention
        for B, H, S, D, causal, d in [(1, 2, 512, 64, False, "float32"), (1, 1, 1000, 128, True, "bfloat16"),
                                      (2, 1, 129, 32, True, "float16")] + \
                ([] if quick else [(1, 1, 4096, 128, False, "bfloat16")]):
            cases.append(("flash_attention", f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}", d, flash_attention,
                          lambda B=B, H=H, S=S, D=D, causal=causal, d=d: (
                              (arr((B, H, S, D), _np_dtype(d)), arr((B, H, S, D), _np_dtype(d)),
                               arr((B, H, S, D), _np_dtype(d))), {"causal": causal}),
                          oracles.attention_ref))
    except ImportError as e:
        cases.append(("flash_attention", "-", "-", None, str(e), None))
    return _with_nki07_twins(cases)


# The NKI 0.7 generation of each kernel, verified on the same shapes right after the 0.1 one.
_NKI07 = {"conv2d+bias+maxpool": ("conv2d_nki07", "fused_conv2d_maxpool"), "matmul": ("matmul_nki07", "matmul"),
          "flash_attention": ("attention_nki07", "flash_attention")}


def _same_inputs(make):
    """``make`` called once; both generations of a case get the same arrays."""
    box = []

    def get():
        if not box:
            box.append(make())
        return box[0]
    return get


def _same_reference(ref):
    """``ref`` computed once per input arrays: the 0.7 twin reuses the 0.1 case's float64 oracle
    (for the CS149 224x224 batch-4 conv that oracle alone takes ~12 s)."""
    memo = {}

    def get(*a, **kw):
        key = (tuple(id(x) for x in a), tuple(sorted((k, repr(v)) for k, v in kw.items())))
        if key not in memo:
            memo.clear()          # keep one result alive at a time (the arrays are large)
            memo[key] = ref(*a, **kw)
        return memo[key]
    return get


def _with_nki07_twins(cases):
    """Each case as (api, ...) followed by its NKI 0.7 twin (the same inputs, oracle, tolerance)."""
    import importlib
    out = []
    for kname, shape, d, fn, make, ref in cases:
        if fn is not None:
            make, ref = _same_inputs(make), _same_reference(ref)
        out.append(("0.1", kname, shape, d, fn, make, ref))
        if fn is None:
            continue
        mod, name = _NKI07[kname]
        try:
            fn07 = getattr(importlib.import_module(f"nki_kernels.kernels.{mod}"), name)
        except ImportError as e:
            out.append(("0.7", kname, shape, "-", None, str(e), None))
            continue
        out.append(("0.7", kname, shape, d, fn07, make, ref))
    return out


def _np_dtype(name):
    import ml_dtypes
    import numpy as np
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def cmd_verify(args) -> int:
    from nki_kernels.backend import resolve
    from nki_kernels.sim import trace_kernel
    from nki_kernels.tolerances import compare
    tracers = {"0.1": trace_kernel, "0.7": resolve("0.7").nki.trace}
    est = None
    if not args.no_estimate:
        try:
            from nki_kernels.perf import estimate_trace as est
        except ImportError:
            est = None
    from nki_kernels.perf.accuracy import TYPICAL_ERROR
    band = f"\u00b1{100 * TYPICAL_ERROR:.0f}%"
    rows, failed = [], 0
    cases = _verify_cases(args.quick)
    print(f"nki-kernels verify: {len(cases)} cases in the NumPy interpreter (nki_kernels.sim) vs float64 oracles")
    for i, (api, kname, shape, d, fn, make, ref) in enumerate(cases, 1):
        if fn is None:
            rows.append((kname, api, shape, d, "-", "-", "MISSING", "-", "-"))
            failed += 1
            print(f"  [{i}/{len(cases)}] {kname}: not available ({make})", flush=True)
            continue
        print(f"  [{i}/{len(cases)}] {kname} (NKI {api}) {shape} {d} ...", end="", flush=True)
        a, kw = make()
        t0 = time.perf_counter()
        out, trace = tracers[api](fn, *a, **kw)
        wall = time.perf_counter() - t0
        res = compare(out, ref(*a, **kw), d)      # the project's one tolerance table
        ok, abs_err, rel_err = res["ok"], res["max_abs_err"], res["max_rel_err"]
        failed += not ok
        e = "-"
        if est is not None:
            try:
                e = f"{est(trace).latency_us:,.1f} {band}"
            except Exception as exc:  # the estimate must never hide the correctness result
                e = f"n/a ({type(exc).__name__})"
        rows.append((kname, api, shape, d, f"{abs_err:.2e}", f"{rel_err:.2e}", "PASS" if ok else "FAIL",
                     f"{wall:.2f}", e))
        print(f" {'PASS' if ok else 'FAIL: ' + res['reason']} ({wall:.2f} s)", flush=True)
    hdr = ("kernel", "NKI", "shape", "dtype", "max abs err", "max rel err", "result", "sim wall s", "est. latency us*")
    widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    print()
    for r in [hdr] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print("\nmax rel err = max|out - ref| / max|ref|.  sim wall s = measured wall time of the interpreter on this "
          "machine.\n* est. latency = trn2 estimate from the cost model (nki_kernels.perf), not a hardware "
          f"measurement, with its typical error {band} (leave-one-out on the public trn2 calibration set, which "
          "has no matmul/conv/attention point, so for these kernels the band is not validated); "
          "see docs/cost-model.md.")
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _run_aliases(path, api):
    """NKI API aliases for `run`: --api, else from the file's imports (`import nki` -> 0.7,
    `neuronxcc` -> 0.1, default 0.1)."""
    if api:
        return (api,)
    from nki_kernels.backend import apis_of_source
    with open(path, encoding="utf-8") as f:
        src = f.read()
    try:
        return apis_of_source(src) or ("0.1",)
    except SyntaxError:
        return ("0.1",)   # let runpy report the syntax error with its location


def _run_options(args):
    """SimOptions for `run`: NKI_SIM_OPTIONS, then the command-line flags on top."""
    from nki_kernels.sim.options import _from_env
    opts = _from_env()
    changes = {}
    if args.strict:
        changes["strict"] = True
    if args.shuffle is not None:
        changes["shuffle_affine_seed"] = args.shuffle
    if args.no_poison:
        changes["poison"] = False
    if args.precision is not None:
        changes["precision"] = args.precision
    return opts.replace(**changes) if changes else opts


def cmd_run(args) -> int:
    import contextlib
    from nki_kernels.sim import SimError, install_neuronxcc_alias, install_nki_alias, set_default_options
    path = args.file
    if not os.path.isfile(path):
        print(f"nki-kernels run: no such file: {path} (relative to {os.getcwd()})", file=sys.stderr)
        return 2
    try:
        opts = _run_options(args)
    except ValueError as exc:
        print(f"nki-kernels run: {exc}", file=sys.stderr)
        return 2
    previous = set_default_options(opts)
    if args.estimate_benchmark:
        from nki_kernels import estimate_benchmark
        estimate_benchmark.install()
    sys.argv = [path] + args.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        # The 0.1 alias defaults third-party code to precision="compat"; an explicit --precision wins.
        with contextlib.ExitStack() as stack:
            for api in _run_aliases(path, getattr(args, "api", None)):
                stack.enter_context(install_nki_alias() if api == "0.7" else
                                    install_neuronxcc_alias(precision=None if args.precision else "compat"))
            runpy.run_path(path, run_name="__main__")
    except SimError as exc:
        if exc.code == "E099" and not args.estimate_benchmark:
            print("nki-kernels run: no Neuron device here; add --estimate-benchmark before the file "
                  "to get cost-model ESTIMATES from nki.benchmark and simulated nki.baremetal outputs",
                  file=sys.stderr)
        raise
    finally:
        if args.estimate_benchmark:
            estimate_benchmark.uninstall()
        set_default_options(previous)
    return 0


def _add_run_flags(r) -> None:
    g = r.add_argument_group("interpreter checks (override NKI_SIM_OPTIONS; give them before FILE)")
    g.add_argument("--strict", action="store_true",
                   help="turn every SimWarning about a hardware-unproven construct into an error")
    g.add_argument("--shuffle", metavar="SEED", type=int, default=None,
                   help="run every nl.affine_range in a seeded shuffled order (exposes loop-carried "
                        "dependencies)")
    g.add_argument("--no-poison", action="store_true",
                   help="do not fill uninitialised memory with NaN (default: poison it)")
    g.add_argument("--precision", choices=("hw", "compat"), default=None,
                   help="hw: round every write to its dtype like hardware; compat (the default "
                        "for run): hold bf16/fp8 at fp32 like neuronxcc's simulator")
    r.add_argument("--estimate-benchmark", action="store_true",
                   help="nki.benchmark returns the cost model's ESTIMATE (not a measurement) as its "
                        "latency, with a banner before every use; nki.baremetal runs on the "
                        "interpreter. Off by default (those APIs need a device)")


def cmd_sim_bench(args) -> int:
    from nki_kernels.sim.speed import main as bench_main
    return bench_main(args.iters)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nki-kernels", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="all kernels in the simulator vs the oracles (the main job)")
    v.add_argument("--quick", action="store_true", help="skip the large shapes (CS149 224x224, 2048^3, S=4096)")
    v.add_argument("--no-estimate", action="store_true", help="do not run the cost model")
    v.set_defaults(func=cmd_verify)
    r = sub.add_parser("run", help="run a Python file with neuronxcc.nki / nki aliased to the interpreter")
    _add_run_flags(r)
    r.add_argument("--api", choices=("0.1", "0.7"), default=None,
                   help="NKI API to alias: 0.1 (neuronxcc.nki) or 0.7 (import nki); default: from the file's imports")
    r.add_argument("file", help="the Python file (relative to the current directory)")
    r.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the file")
    r.set_defaults(func=cmd_run)
    b = sub.add_parser("sim-bench", help="measure the interpreter's per-instruction overhead and matmul loop")
    b.add_argument("--iters", type=int, default=1000, help="matmuls in the loop (default 1000)")
    b.set_defaults(func=cmd_sim_bench)
    from nki_kernels.conformance import add_subcommand as add_conformance
    add_conformance(sub)
    try:
        from nki_kernels.perf.cli import add_subcommands
        add_subcommands(sub)
    except ImportError:
        pass
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
