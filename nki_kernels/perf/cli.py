"""Cost-model subcommands for the ``nki-kernels`` CLI: ``profile``, ``bench``, ``roofline``.

``nki_kernels.cli`` calls :func:`add_subcommands` on its argparse subparsers.  Every figure
printed is labelled as an estimate of the cost model.
"""
from __future__ import annotations

import json
import os
import sys
import time

from .model import ESTIMATE_LABEL

_KERNELS = {
    "conv": ("nki_kernels.kernels.conv2d:fused_conv2d_maxpool", "B,C,O,H,W,K (pool via --pool)"),
    "matmul": ("nki_kernels.kernels.matmul:matmul", "K,M,N  (lhsT is K x M, rhs K x N)"),
    "attention": ("nki_kernels.kernels.attention:flash_attention", "B,H,S,D (q, k, v are B x H x S x D)"),
}
for _n in ("vector_add_tiled", "vector_add_stream", "transpose_2d", "add_2d", "row_max", "nonzero_count"):
    _KERNELS[_n] = (f"nki_kernels.perf.calib_kernels:{_n}", "calibration kernel; see calib_kernels.py")


def _shape(text):
    try:
        return tuple(int(x) for x in text.lower().replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise SystemExit(f"--shape: expected comma-separated integers, got {text!r}")


def _make_inputs(name, shape, dtype, a):
    from .bench import _arr
    if name == "conv":
        B, C, O, H, W, K = shape
        return ((_arr((B, C, H, W), dtype, 1), _arr((O, C, K, K), dtype, 2, 1 / (3 * K)), _arr((O,), dtype, 3)),
                {"pool_size": a.pool})
    if name == "matmul":
        K, M, N = shape
        return ((_arr((K, M), dtype, 4, 0.1), _arr((K, N), dtype, 5, 0.1)), {})
    if name == "attention":
        B, H, S, D = shape
        return ((_arr((B, H, S, D), dtype, 6), _arr((B, H, S, D), dtype, 7), _arr((B, H, S, D), dtype, 8)),
                {"causal": a.causal})
    if name in ("vector_add_tiled", "vector_add_stream"):
        (n,) = shape[:1]
        kw = {"row_chunk": shape[1]} if name == "vector_add_tiled" and len(shape) > 1 else \
             ({"free_dim": shape[1]} if len(shape) > 1 else {})
        return ((_arr((n,), dtype, 1), _arr((n,), dtype, 2)), kw)
    if name in ("transpose_2d",):
        return ((_arr(shape, dtype, 3),), {})
    if name == "add_2d":
        return ((_arr(shape, dtype, 1), _arr(shape, dtype, 2)), {})
    return ((_arr(shape, dtype, 1),), {})


def _load(path):
    from .bench import _load as load
    return load(path)


def cmd_profile(a) -> int:
    from .model import estimate
    if a.kernel in _KERNELS:
        path, _ = _KERNELS[a.kernel]
    elif ":" in a.kernel:
        path = a.kernel
    else:
        print(f"unknown kernel {a.kernel!r}; use one of {', '.join(_KERNELS)} or module:function", file=sys.stderr)
        return 2
    try:
        kern = _load(path)
    except (ImportError, AttributeError) as exc:
        print(f"kernel not available yet: {path} ({exc})", file=sys.stderr)
        return 2
    if a.kernel not in _KERNELS and not a.shape:
        print("--shape is required", file=sys.stderr)
        return 2
    args, kwargs = _make_inputs(a.kernel, _shape(a.shape), a.dtype, a)
    print(f"tracing {path} {a.shape} {a.dtype} on the interpreter ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    est = estimate(kern, *args, numerics=a.numerics, mode=a.mode, hw=a.hw, **kwargs)
    print(f"traced + scheduled {est.n_events} instructions in {time.perf_counter() - t:.1f} s",
          file=sys.stderr)
    print(est.summary(top=a.top))
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"{a.kernel.replace(':', '_')}_{a.shape.replace(',', 'x')}_{a.dtype}")
    tp = est.write_chrome_trace(stem + ".trace.json")
    jp = est.write_json(stem + ".json")
    print(f"timeline ({ESTIMATE_LABEL}): {tp}  (open in https://ui.perfetto.dev or chrome://tracing)")
    print(f"record: {jp}")
    return 0


def cmd_bench(a) -> int:
    from .bench import bench_records, render, run_bench
    rows = run_bench(a.only or None, numerics=a.numerics, trace_dir=a.out if a.traces else None, mode=a.mode)
    print(render(rows))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "bench.json")
    with open(path, "w") as f:
        json.dump({"label": ESTIMATE_LABEL, "rows": bench_records(rows)}, f, indent=1, default=str)
    print(f"\nrecord: {path}")
    if a.roofline:
        return _roofline_from_rows(rows, os.path.join(a.out, "roofline.png"), a.hw)
    return 0


def _roofline_from_rows(rows, path, hw) -> int:
    from .roofline import plot_roofline, point_of
    pts = [point_of(r.case.key, r.est) for r in rows if r.status == "ok"]
    try:
        plot_roofline(pts, path, hw=hw)
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 3
    print(f"roofline ({ESTIMATE_LABEL} points): {path}")
    return 0


def cmd_roofline(a) -> int:
    """Plot the bench kernels (or records given with --from) against the roofline."""
    from .roofline import plot_roofline, point_of
    pts = []
    if a.records:
        for p in a.records:
            with open(p) as f:
                d = json.load(f)
            for r in d.get("rows", [d]):
                e = r.get("estimate", r)
                if "latency_us" in e:
                    pts.append(point_of(r.get("label", e.get("kernel", p)), e))
    else:
        from .bench import run_bench
        rows = run_bench(a.only or None, numerics=False, mode=a.mode)
        pts = [point_of(r.case.key, r.est) for r in rows if r.status == "ok"]
        if not pts:
            print("no kernel available to place on the roofline; plotting the roofs only", file=sys.stderr)
    try:
        path = plot_roofline(pts, a.output, hw=a.hw)
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 3
    print(f"roofline ({ESTIMATE_LABEL} points): {path}")
    return 0


def _common(p):
    p.add_argument("--mode", choices=("benchmark", "profile"), default="benchmark",
                   help="benchmark = nki.benchmark latency (HW-DGE); profile = neuron-profile total_time")
    p.add_argument("--hw", default="trn2", help="trn2 | trn1 | path to a JSON hardware description")


def add_subcommands(subparsers) -> None:
    p = subparsers.add_parser("profile", help="cost-model ESTIMATE of one kernel: summary + Chrome trace")
    p.add_argument("kernel", help=f"{' | '.join(_KERNELS)} | module:function")
    p.add_argument("--shape", default="", help="; ".join(f"{k}: {v[1]}" for k, v in list(_KERNELS.items())[:3]))
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--pool", type=int, default=1, help="conv pool size")
    p.add_argument("--causal", action="store_true", help="attention: causal mask")
    p.add_argument("--numerics", action="store_true", help="also compute the outputs (slower)")
    p.add_argument("--top", type=int, default=8, help="kernel lines to list")
    p.add_argument("--out", default="perf-out", help="directory for the trace and JSON record")
    _common(p)
    p.set_defaults(func=cmd_profile)

    b = subparsers.add_parser("bench", help="headline table of cost-model ESTIMATES vs physical limits")
    b.add_argument("--only", nargs="*", help="substrings of case keys (conv224, conv32x16, matmul, attn)")
    b.add_argument("--numerics", action="store_true", help="also compute outputs (much slower)")
    b.add_argument("--traces", action="store_true", help="write a Chrome trace per kernel")
    b.add_argument("--roofline", action="store_true", help="also write roofline.png (needs matplotlib)")
    b.add_argument("--out", default="perf-out")
    _common(b)
    b.set_defaults(func=cmd_bench)

    r = subparsers.add_parser("roofline", help="roofline PNG of the bench kernels (ESTIMATES; needs matplotlib)")
    r.add_argument("--from", dest="records", nargs="*", help="JSON records (bench.json or profile records)")
    r.add_argument("--only", nargs="*")
    r.add_argument("-o", "--output", default="perf-out/roofline.png")
    _common(r)
    r.set_defaults(func=cmd_roofline)


def main(argv=None) -> int:
    """Standalone entry (``python -m nki_kernels.perf.cli``) for use before the main CLI wires it."""
    import argparse
    ap = argparse.ArgumentParser(prog="nki-kernels (perf)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_subcommands(sub)
    a = ap.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
