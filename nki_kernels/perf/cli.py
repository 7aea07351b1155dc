"""Cost-model subcommands for the ``nki-kernels`` CLI: ``profile``, ``bench``, ``roofline``.

``nki_kernels.cli`` calls :func:`add_subcommands` on its argparse subparsers.  Every figure
printed is labelled as an estimate of the cost model.  Every bad argument is a usage error
(exit 2, one line saying what is allowed) before any work; output file names encode every
parameter that changes the result, so two different runs never write the same file.
"""
from __future__ import annotations

import datetime as _dt
import inspect
import json
import os
import sys
import time
from dataclasses import dataclass

from .model import ESTIMATE_LABEL


class UsageError(Exception):
    """A bad command-line argument: printed as one line, exit code 2."""


@dataclass(frozen=True)
class KernelSpec:
    target: str              # module:function
    dims: str                # what --shape holds
    ndims: tuple             # allowed numbers of --shape values
    default_shape: str = ""  # "" = --shape required
    default_dtype: str = "bfloat16"


# Default shapes = the README's headline shapes (python3 dev.py bench).
_KERNELS = {
    "conv": KernelSpec("nki_kernels.kernels.conv2d:fused_conv2d_maxpool", "B,C_in,C_out,H,W,K", (6,),
                       "1,256,256,224,224,3", "float16"),
    "matmul": KernelSpec("nki_kernels.kernels.matmul:matmul", "K,M,N (lhsT is K x M, rhs K x N)", (3,),
                         "2048,2048,2048"),
    "attention": KernelSpec("nki_kernels.kernels.attention:flash_attention", "B,H,S,D (q, k, v are B x H x S x D)",
                            (4,), "1,1,4096,128"),
    "vector_add_tiled": KernelSpec("nki_kernels.perf.calib_kernels:vector_add_tiled", "N[,row_chunk]", (1, 2)),
    "vector_add_stream": KernelSpec("nki_kernels.perf.calib_kernels:vector_add_stream", "N[,free_dim]", (1, 2)),
    "transpose_2d": KernelSpec("nki_kernels.perf.calib_kernels:transpose_2d", "rows,cols", (2,)),
    "add_2d": KernelSpec("nki_kernels.perf.calib_kernels:add_2d", "rows,cols", (2,)),
    "row_max": KernelSpec("nki_kernels.perf.calib_kernels:row_max", "rows,cols", (2,)),
    "nonzero_count": KernelSpec("nki_kernels.perf.calib_kernels:nonzero_count", "rows,cols", (2,)),
}
_CUSTOM = KernelSpec("", "the shape of its one input array", tuple(range(1, 9)))
DTYPES = ("float32", "bfloat16", "float16")
_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def parse_shape(text: str, spec: KernelSpec, kernel: str) -> tuple:
    """``"1,256,256,224,224,3"`` (or ``1x256x...``) -> ints, each >= 1, as many as the kernel takes."""
    parts = [x.strip() for x in text.lower().replace("x", ",").split(",")]
    try:
        shape = tuple(int(x) for x in parts)
    except ValueError:
        raise UsageError(f"--shape {text!r}: expected comma-separated positive integers ({spec.dims})") from None
    if any(v < 1 for v in shape):
        raise UsageError(f"--shape {text!r}: every value must be >= 1 ({spec.dims})")
    if len(shape) not in spec.ndims:
        n = " or ".join(map(str, spec.ndims)) if len(spec.ndims) < 4 else "1 to 8"
        raise UsageError(f"--shape {text!r}: {kernel} takes {n} values ({spec.dims}), got {len(shape)}")
    return shape


def _check_hw(hw: str) -> str:
    from .hardware import get_hardware
    try:
        get_hardware(hw)
    except (ValueError, OSError, KeyError, TypeError) as exc:
        raise UsageError(f"--hw {hw!r}: {exc}") from None
    return hw


def _hw_tag(hw: str) -> str:
    return hw.lower() if not os.path.exists(hw) else "hw-" + os.path.splitext(os.path.basename(hw))[0]


def _check_out_dir(path: str, flag: str = "--out") -> str:
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag} {path!r} exists and is not a directory")
    return path


def _make_inputs(name, shape, dtype, pool, causal):
    from .bench import _arr
    if name == "conv":
        B, C, O, H, W, K = shape
        if K > H or K > W:
            raise UsageError(f"--shape: filter K={K} is larger than the image {H}x{W}")
        return ((_arr((B, C, H, W), dtype, 1), _arr((O, C, K, K), dtype, 2, 1 / (3 * K)), _arr((O,), dtype, 3)),
                {"pool_size": pool})
    if name == "matmul":
        K, M, N = shape
        return ((_arr((K, M), dtype, 4, 0.1), _arr((K, N), dtype, 5, 0.1)), {})
    if name == "attention":
        B, H, S, D = shape
        return ((_arr((B, H, S, D), dtype, 6), _arr((B, H, S, D), dtype, 7), _arr((B, H, S, D), dtype, 8)),
                {"causal": causal})
    if name in ("vector_add_tiled", "vector_add_stream"):
        n = shape[0]
        kw = {}
        if len(shape) > 1:
            kw = {"row_chunk": shape[1]} if name == "vector_add_tiled" else {"free_dim": shape[1]}
        return ((_arr((n,), dtype, 1), _arr((n,), dtype, 2)), kw)
    if name == "add_2d":
        return ((_arr(shape, dtype, 1), _arr(shape, dtype, 2)), {})
    return ((_arr(shape, dtype, 1),), {})


def _load(path):
    from .bench import _load as load
    return load(path)


def profile_stem(kernel, shape, dtype, pool, causal, mode, hw) -> str:
    """File stem naming every parameter that changes the estimate."""
    parts = [kernel.replace(":", "_").replace("/", "_"), "x".join(map(str, shape)), _SHORT[dtype]]
    if kernel == "conv":
        parts.append(f"pool{pool}")
    if kernel == "attention":
        parts.append("causal" if causal else "noncausal")
    parts += [mode, _hw_tag(hw)]
    return "_".join(parts)


def _profile_args(a):
    """Validate everything `profile` was given; returns (spec, target, shape, dtype, pool, causal)."""
    if a.kernel in _KERNELS:
        spec = _KERNELS[a.kernel]
        target = spec.target
    elif ":" in a.kernel and all(a.kernel.split(":", 1)):
        spec, target = _CUSTOM, a.kernel
    else:
        raise UsageError(f"unknown kernel {a.kernel!r}; allowed: {', '.join(_KERNELS)} or module:function")
    text = a.shape or spec.default_shape
    if not text:
        raise UsageError(f"profile {a.kernel}: --shape is required ({spec.dims})")
    shape = parse_shape(text, spec, a.kernel)
    if a.pool is not None and a.kernel != "conv":
        raise UsageError(f"--pool applies only to conv, not {a.kernel}")
    if a.pool is not None and a.pool < 1:
        raise UsageError(f"--pool must be >= 1, got {a.pool}")
    if a.causal and a.kernel != "attention":
        raise UsageError(f"--causal applies only to attention, not {a.kernel}")
    if a.top < 0:
        raise UsageError(f"--top must be >= 0, got {a.top}")
    _check_hw(a.hw)
    _check_out_dir(a.out)
    return spec, target, shape, a.dtype or spec.default_dtype, a.pool or 1, a.causal


def cmd_profile(a) -> int:
    from .model import estimate
    spec, target, shape, dtype, pool, causal = _profile_args(a)
    try:
        kern = _load(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"kernel {target!r} cannot be imported: {exc}") from None
    args, kwargs = _make_inputs(a.kernel, shape, dtype, pool, causal)
    label = f"{a.kernel} {','.join(map(str, shape))} {dtype}" + (f" pool {pool}" if a.kernel == "conv" else "") + \
        (" causal" if causal else "")
    print(f"tracing {target} ({label}) on the interpreter ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        est = estimate(kern, *args, numerics=a.numerics, mode=a.mode, hw=a.hw, **kwargs)
    except ValueError as exc:
        from nki_kernels.sim import SimError
        if isinstance(exc, SimError):
            raise
        # The kernel's own argument checks (sizes it does not support): a usage error.
        raise UsageError(f"{a.kernel} rejected --shape {','.join(map(str, shape))} / --dtype {dtype}: {exc}") from None
    print(f"traced + scheduled {est.n_events} instructions in {time.perf_counter() - t:.1f} s",
          file=sys.stderr)
    print(est.summary(top=a.top))
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, profile_stem(a.kernel, shape, dtype, pool, causal, a.mode, a.hw))
    tp = est.write_chrome_trace(stem + ".trace.json")
    jp = est.write_json(stem + ".json")
    print(f"timeline ({ESTIMATE_LABEL}): {tp}  (open in https://ui.perfetto.dev or chrome://tracing)")
    print(f"record: {jp}")
    return 0


# ------------------------------------------------------------------ bench
def _case_keys() -> list:
    from .bench import cases
    return [c.key for c in cases()]


def _check_only(only) -> list | None:
    if not only:
        return None
    keys = _case_keys()
    for s in only:
        if not any(s in k for k in keys):
            raise UsageError(f"--only {s!r} matches no bench case; each value is a substring of one of: "
                             f"{', '.join(keys)}")
    return sorted(set(only))


def _check_bench_hw(hw: str) -> str:
    from .bench import run_bench
    _check_hw(hw)
    if hw != "trn2" and "hw" not in inspect.signature(run_bench).parameters:
        raise UsageError(f"--hw {hw!r}: bench estimates trn2 only (its cases are trn2 kernels); "
                         "use profile --hw for another target")
    return hw


def bench_suffix(mode: str, hw: str, only) -> str:
    """What distinguishes one bench record from another: mode, hardware, selected cases."""
    return "_".join([mode, _hw_tag(hw)] + (["only-" + "+".join(only)] if only else []))


def _run_bench(only, mode, hw, numerics=False, trace_dir=None):
    from .bench import run_bench
    kw = {"hw": hw} if "hw" in inspect.signature(run_bench).parameters else {}
    return run_bench(only, progress=sys.stderr, numerics=numerics, trace_dir=trace_dir, mode=mode, **kw)


def _write_bench_record(rows, out, mode, hw, only) -> str:
    from .bench import bench_records
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"bench_{bench_suffix(mode, hw, only)}.json")
    rec = {"label": ESTIMATE_LABEL, "params": {"mode": mode, "hw": hw, "only": only},
           "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "rows": bench_records(rows)}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1, default=str)
    os.replace(tmp, path)
    return path


def cmd_bench(a) -> int:
    from .bench import render
    only = _check_only(a.only)
    _check_bench_hw(a.hw)
    _check_out_dir(a.out)
    trace_dir = None
    if a.traces:  # one folder per mode/hw/selection: the traces inside are named by case key only
        trace_dir = os.path.join(a.out, f"traces_{bench_suffix(a.mode, a.hw, only)}")
        os.makedirs(trace_dir, exist_ok=True)
    rows = _run_bench(only, a.mode, a.hw, numerics=a.numerics, trace_dir=trace_dir)
    print(render(rows))
    path = _write_bench_record(rows, a.out, a.mode, a.hw, only)
    print(f"\nrecord: {path}")
    if a.roofline:
        pts = [_point(r.case.key, r.est) for r in rows if r.status == "ok"]
        return _plot(pts, os.path.join(a.out, f"roofline_{bench_suffix(a.mode, a.hw, only)}.png"), a.hw)
    return 0


# ------------------------------------------------------------------ roofline
def _point(label, est):
    from .roofline import point_of
    return point_of(label, est)


def _plot(pts, path, hw) -> int:
    from .roofline import plot_roofline
    try:
        plot_roofline(pts, path, hw=hw)
    except RuntimeError as exc:  # matplotlib missing
        print(str(exc), file=sys.stderr)
        return 3
    print(f"roofline ({ESTIMATE_LABEL} points): {path}")
    return 0


def _read_record(path: str) -> dict:
    if not os.path.isfile(path):
        raise UsageError(f"--from {path!r}: no such file")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--from {path!r}: not a JSON record ({exc})") from None


def _points_of_record(d: dict, path: str, only=None) -> list:
    if not isinstance(d, dict):
        raise UsageError(f"--from {path!r}: expected a bench.json or profile record (a JSON object)")
    pts = []
    for r in d.get("rows", [d]):
        if not isinstance(r, dict):
            continue
        if only and not any(s in str(r.get("key", "")) for s in only):
            continue
        e = r.get("estimate", r)
        if isinstance(e, dict) and all(k in e for k in ("latency_us", "flops", "hbm_bytes")):
            e = dict(e, mm_dtype=e.get("mm_dtype", ""))
            pts.append(_point(r.get("key") or r.get("label") or e.get("kernel") or os.path.basename(path), e))
    return pts


def _source_mtime() -> float:
    """Newest modification time of the code an estimate depends on (kernels, interpreter, model)."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest = 0.0
    for root, _, names in os.walk(pkg):
        for n in names:
            if n.endswith(".py"):
                newest = max(newest, os.path.getmtime(os.path.join(root, n)))
    return newest


def fresh_bench_record(out, mode, hw, only):
    """A bench record in ``out`` for this mode/hw covering ``only``, newer than every source file."""
    candidates = [os.path.join(out, f"bench_{bench_suffix(mode, hw, only)}.json")]
    if only:
        candidates.append(os.path.join(out, f"bench_{bench_suffix(mode, hw, None)}.json"))
    newest = _source_mtime()
    for path in candidates:
        try:
            if os.path.getmtime(path) <= newest:
                continue
            with open(path) as f:
                d = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        p = d.get("params", {})
        if p.get("mode") == mode and p.get("hw") == hw and all(r.get("status") == "ok" for r in d.get("rows", [])):
            return path, d
    return None, None


def cmd_roofline(a) -> int:
    """Plot the bench kernels (a fresh bench record, or records given with --from) on the roofline."""
    only = _check_only(a.only)
    _check_hw(a.hw)
    _check_out_dir(a.out)
    output = a.output or os.path.join(a.out, f"roofline_{bench_suffix(a.mode, a.hw, only)}.png")
    pts = []
    if a.records is not None:
        if not a.records:
            raise UsageError("--from needs at least one JSON record (bench_*.json or a profile record)")
        for p in a.records:
            pts += _points_of_record(_read_record(p), p, only)
        if not pts:
            raise UsageError(f"--from: no estimate with latency_us, flops and hbm_bytes in {', '.join(a.records)}")
    else:
        path, d = (None, None) if a.rerun else fresh_bench_record(a.out, a.mode, a.hw, only)
        if path:
            print(f"reusing {path} (written {d.get('created_utc', '?')}, newer than every source file; "
                  "--rerun recomputes)", file=sys.stderr)
            pts = _points_of_record(d, path, only)
        else:
            _check_bench_hw(a.hw)
            rows = _run_bench(only, a.mode, a.hw)
            rec = _write_bench_record(rows, a.out, a.mode, a.hw, only)
            print(f"record: {rec}", file=sys.stderr)
            pts = [_point(r.case.key, r.est) for r in rows if r.status == "ok"]
        if not pts:
            print("no kernel available to place on the roofline; plotting the roofs only", file=sys.stderr)
    return _plot(pts, output, a.hw)


# ------------------------------------------------------------------ parser
def _common(p):
    p.add_argument("--mode", choices=("benchmark", "profile"), default="benchmark",
                   help="benchmark = nki.benchmark latency (HW-DGE); profile = neuron-profile total_time")
    p.add_argument("--hw", default="trn2", help="trn2 | trn1 | path to a JSON hardware description")


def _guard(func):
    """Run a subcommand; a UsageError becomes one line on stderr and exit code 2."""
    def run(a):
        try:
            return func(a)
        except UsageError as exc:
            print(f"nki-kernels {a.cmd}: {exc}", file=sys.stderr)
            return 2
    run.__name__ = func.__name__
    return run


def add_subcommands(subparsers) -> None:
    shapes = "; ".join(f"{k}: {v.dims}, default {v.default_shape}" for k, v in list(_KERNELS.items())[:3])
    p = subparsers.add_parser(
        "profile", help="cost-model ESTIMATE of one kernel: summary + Chrome trace",
        description="Estimate one kernel with the cost model (an ESTIMATE, not a measurement). "
                    f"Shapes: {shapes}; calibration kernels and module:function need --shape.")
    p.add_argument("kernel", help=f"{' | '.join(_KERNELS)} | module:function")
    p.add_argument("--shape", default="", help="comma-separated sizes; default: the README headline shape "
                                               f"({shapes})")
    p.add_argument("--dtype", default=None, choices=DTYPES,
                   help="default: float16 for conv (CS149), bfloat16 otherwise")
    p.add_argument("--pool", type=int, default=None, help="conv only: pool size >= 1 (default 1)")
    p.add_argument("--causal", action="store_true", help="attention only: causal mask")
    p.add_argument("--numerics", action="store_true", help="also compute the outputs (slower)")
    p.add_argument("--top", type=int, default=8, help="kernel lines to list (>= 0)")
    p.add_argument("--out", default="perf-out", help="directory for the trace and JSON record; file names "
                                                     "encode kernel, shape, dtype, pool/causal, mode, hw")
    _common(p)
    p.set_defaults(func=_guard(cmd_profile))

    b = subparsers.add_parser("bench", help="headline table of cost-model ESTIMATES vs physical limits")
    b.add_argument("--only", nargs="+", metavar="KEY", help="substrings of case keys (conv224, conv32x16, "
                                                            "matmul, attn); unknown ones are rejected")
    b.add_argument("--numerics", action="store_true", help="also compute outputs (much slower)")
    b.add_argument("--traces", action="store_true",
                   help="write a Chrome trace per kernel into <out>/traces_<mode>_<hw>[_only-...]/")
    b.add_argument("--roofline", action="store_true", help="also write roofline_<mode>_<hw>.png (needs matplotlib)")
    b.add_argument("--out", default="perf-out", help="directory for bench_<mode>_<hw>[_only-...].json")
    _common(b)
    b.set_defaults(func=_guard(cmd_bench))

    r = subparsers.add_parser(
        "roofline", help="roofline PNG of the bench kernels (ESTIMATES; needs matplotlib)",
        description="Reuses a bench record in --out that is newer than every source file (same --mode, "
                    "--hw, --only), else runs the bench first; --from plots given records instead.")
    r.add_argument("--from", dest="records", nargs="*", metavar="JSON",
                   help="JSON records (bench_*.json or profile records)")
    r.add_argument("--only", nargs="+", metavar="KEY", help="substrings of bench case keys")
    r.add_argument("--rerun", action="store_true", help="recompute the bench even if a fresh record exists")
    r.add_argument("--out", default="perf-out", help="directory of the bench records (default perf-out)")
    r.add_argument("-o", "--output", default=None, help="PNG path (default <out>/roofline_<mode>_<hw>.png)")
    _common(r)
    r.set_defaults(func=_guard(cmd_roofline))


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
