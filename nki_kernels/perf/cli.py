"""Cost-model subcommands for the ``nki-kernels`` CLI: ``profile``, ``bench``, ``roofline``.

``nki_kernels.cli`` calls :func:`add_subcommands` on its argparse subparsers.  Every figure
printed is labelled as an estimate of the cost model.  Every bad argument is a usage error
(exit 2, one line saying what is allowed) before any work; output file names encode every
parameter that changes the result, so two different runs never write the same file.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import inspect
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from nki_kernels import lifecycle, userkernel
from nki_kernels.kernels import registry
from nki_kernels.progress import Progress
from nki_kernels.sim import SimError, set_default_options
from nki_kernels.usage import (
    UsageError,
    add_max_instructions,
    int_at_least,
    int_in_range,
    writable_dir,
    writable_file,
    write_atomically,
)

from . import bench
from .hardware import get_hardware
from .labels import ESTIMATE_LABEL
from .model import estimate
from .roofline import plot_roofline, point_of


@dataclass(frozen=True)
class KernelSpec:
    target: str  # module:function
    dims: str  # what --shape holds
    ndims: tuple  # allowed numbers of --shape values
    default_shape: str = ""  # "" = --shape required
    default_dtype: str = "bfloat16"


# The project's kernels come from the kernel registry (default shape: its headline case for
# `profile`); the calibration kernels are the cost model's own.
_KERNELS = {
    **{
        s.cli_name: KernelSpec(
            s.entry_01,
            s.cli_dims,
            (len(s.cli_params),),
            ",".join(map(str, s.cli_values(s.default_case()))),
            s.default_dtype,
        )
        for s in registry.SPECS
    },
    "vector_add_tiled": KernelSpec("nki_kernels.perf.calib_kernels:vector_add_tiled", "N[,row_chunk]", (1, 2)),
    "vector_add_stream": KernelSpec("nki_kernels.perf.calib_kernels:vector_add_stream", "N[,free_dim]", (1, 2)),
    "transpose_2d": KernelSpec("nki_kernels.perf.calib_kernels:transpose_2d", "rows,cols", (2,)),
    "add_2d": KernelSpec("nki_kernels.perf.calib_kernels:add_2d", "rows,cols", (2,)),
    "row_max": KernelSpec("nki_kernels.perf.calib_kernels:row_max", "rows,cols", (2,)),
    "nonzero_count": KernelSpec("nki_kernels.perf.calib_kernels:nonzero_count", "rows,cols", (2,)),
}
# Your own kernel: float32 inputs unless --dtype says otherwise -- the dtype a NumPy user means by "floats"
# (NumPy's own default is float64, which NKI has not).  bf16 was the default once, shown only in the file
# name: a kernel written for fp32 was estimated on bf16 inputs without a word (its matmuls 4x faster).
_CUSTOM = KernelSpec(
    "", "the shape of one array argument; one --shape per argument", tuple(range(1, 9)), default_dtype="float32"
)
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
    if hw.lower().endswith(".json") or os.sep in hw or "/" in hw:  # a file, not a name
        if not os.path.exists(hw):
            raise UsageError(f"--hw {hw!r}: no such file (a hardware description is trn2, trn1 or a JSON file)")
        if not os.path.isfile(hw):
            raise UsageError(f"--hw {hw!r} is not a file")
        try:
            with open(hw, encoding="utf-8") as f:
                desc = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"--hw {hw!r}: not a JSON hardware description ({exc})") from None
        if not isinstance(desc, dict):
            raise UsageError(
                f"--hw {hw!r}: expected a JSON object with name, base and constants, got a JSON {type(desc).__name__}"
            )
    try:
        get_hardware(hw)
    except (ValueError, OSError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"--hw {hw!r}: {exc}") from None
    return hw


def _hw_tag(hw: str) -> str:
    return hw.lower() if not os.path.exists(hw) else "hw-" + os.path.splitext(os.path.basename(hw))[0]


def _check_out_dir(path: str, flag: str = "--out") -> str:
    return writable_dir(path, flag)


# The interpreter holds every input and output in host memory (more than once while converting).
# A shape whose tensors exceed a trn2 device's HBM (registry.HBM_BYTES) or this machine's memory
# cannot run: it is rejected from its sizes, before anything is allocated.
_HOST_COPIES = 3


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _tensor_shapes(name, shapes):
    """(inputs, outputs) shapes of a calibration kernel or a user's kernel (outputs unknown)."""
    shape = shapes[0]
    if name in ("vector_add_tiled", "vector_add_stream"):
        return [(shape[0],)] * 2, [(shape[0],)]
    if name == "add_2d":
        return [shape] * 2, [shape]
    return list(shapes), []


def _check_fits(name, shapes, dtype, pool, causal) -> None:
    """The kernel registry's feasibility check (HBM, the kernel's own tiling plan on shape
    stand-ins) for the project's kernels, the HBM bound for the others; then host memory."""
    where = f"--shape {' '.join(','.join(map(str, s)) for s in shapes)} {dtype}"
    if name in {s.cli_name for s in registry.SPECS}:
        spec = registry.get(name)
        try:
            case = spec.case_from_cli(shapes[0], dtype, pool=pool, causal=causal)
            spec.check_feasible(case)
        except registry.ShapeError as exc:  # names the case (kernel and every size) and the limit
            raise UsageError(str(exc)) from None
        total = spec.hbm_bytes(case)
    else:
        ins, outs = _tensor_shapes(name, shapes)
        total = sum(math.prod(s) for s in ins + outs) * registry.ITEMSIZE[dtype]
        if total > registry.HBM_BYTES:
            raise UsageError(
                f"{where}: the kernel's inputs and outputs need {total / 2**30:,.1f} GiB, more than "
                f"the {registry.HBM_BYTES // 2**30} GiB of HBM of a trn2 device"
            )
    mem = _host_memory()
    if mem is not None and total * _HOST_COPIES > mem:
        raise UsageError(
            f"{where}: the interpreter needs about {total * _HOST_COPIES / 2**30:,.1f} GiB of memory "
            f"for these tensors, this machine has {mem / 2**30:,.1f} GiB"
        )


def _make_inputs(name: str, shape: tuple[int, ...], dtype: str, pool: int, causal: bool) -> tuple[tuple, dict]:
    if name in {s.cli_name for s in registry.SPECS}:
        spec = registry.get(name)
        return spec.make_inputs(spec.case_from_cli(shape, dtype, pool=pool, causal=causal))
    if name in ("vector_add_tiled", "vector_add_stream"):
        n = shape[0]
        kw = {}
        if len(shape) > 1:
            kw = {"row_chunk": shape[1]} if name == "vector_add_tiled" else {"free_dim": shape[1]}
        return ((bench._arr((n,), dtype, 1), bench._arr((n,), dtype, 2)), kw)
    if name == "add_2d":
        return ((bench._arr(shape, dtype, 1), bench._arr(shape, dtype, 2)), {})
    return ((bench._arr(shape, dtype, 1),), {})


def _make_custom_inputs(shapes, dtype):
    """One array per --shape, each with its own seed, for a module:function / file.py:kernel target."""
    return tuple(bench._arr(s, dtype, i + 1) for i, s in enumerate(shapes)), {}


def profile_stem(kernel: str, shape: tuple, dtype: str, pool: int, causal: bool, mode: str, hw: str) -> str:
    """File stem naming every parameter that changes the estimate."""
    shapes = shape if shape and isinstance(shape[0], tuple) else (shape,)  # one shape, or one per argument
    dims = "+".join("x".join(map(str, s)) for s in shapes)
    name = kernel.replace(".py:", ":").replace(":", "_").replace("/", "_").replace(os.sep, "_")
    parts = [name, dims, _SHORT[dtype]]
    if kernel == "conv":
        parts.append(f"pool{pool}")
    if kernel == "attention":
        parts.append("causal" if causal else "noncausal")
    parts += [mode, _hw_tag(hw)]
    return "_".join(parts)


def _profile_args(a):
    """Validate everything `profile` was given, before any work; returns
    (spec, target, shapes, dtype, pool, causal, loaded) where ``loaded`` is the user's kernel
    (a :class:`nki_kernels.userkernel.LoadedKernel`, to close) or None for a built-in one."""
    if a.kernel in _KERNELS:
        spec = _KERNELS[a.kernel]
        target = spec.target
    elif ":" in a.kernel and all(a.kernel.rsplit(":", 1)):
        spec, target = _CUSTOM, a.kernel
    else:
        raise UsageError(
            f"unknown kernel {a.kernel!r}; allowed: {', '.join(_KERNELS)}, path/to/file.py:kernel "
            "or package.module:kernel"
        )
    texts = a.shape or ([spec.default_shape] if spec.default_shape else [])
    if not texts:
        raise UsageError(f"profile {a.kernel}: --shape is required ({spec.dims})")
    if len(texts) > 1 and spec is not _CUSTOM:
        raise UsageError(f"--shape given {len(texts)} times; {a.kernel} takes one ({spec.dims})")
    shapes = [parse_shape(t, spec, a.kernel) for t in texts]
    if a.pool is not None and a.kernel != "conv":
        raise UsageError(f"--pool applies only to conv, not {a.kernel}")
    if a.causal and a.kernel != "attention":
        raise UsageError(f"--causal applies only to attention, not {a.kernel}")
    dtype = a.dtype or spec.default_dtype
    pool = a.pool or 1
    if a.kernel == "conv":
        B, _C, _C_out, H, W, K = shapes[0]
        if K > H or K > W:
            raise UsageError(f"--shape: filter K={K} is larger than the image {H}x{W}")
    _check_hw(a.hw)
    _check_fits(a.kernel, shapes, dtype, pool, a.causal)
    loaded = userkernel.load(target) if spec is _CUSTOM else None
    try:
        if loaded is not None:
            required, optional = userkernel.array_parameters(loaded.kernel)
            if required or optional:
                if not len(required) <= len(shapes) <= len(required) + len(optional):
                    names = ", ".join(required + [f"[{o}]" for o in optional])
                    raise UsageError(
                        f"{target} takes {len(required)} array argument(s) ({names}); give one --shape "
                        f"per argument, got {len(shapes)}"
                    )
        _check_out_dir(a.out)
    except BaseException:
        if loaded is not None:
            loaded.close()
        raise
    return spec, target, shapes, dtype, pool, a.causal, loaded


def cmd_profile(a: argparse.Namespace) -> int:
    spec, target, shapes, dtype, pool, causal, loaded = _profile_args(a)
    try:
        return _profile(a, target, shapes, dtype, pool, causal, loaded)
    finally:
        if loaded is not None:
            loaded.close()


def _profile(a, target, shapes, dtype, pool, causal, loaded) -> int:
    if loaded is not None:
        kern = loaded.kernel
        args, kwargs = _make_custom_inputs(shapes, dtype)
    else:
        try:
            kern = bench._load(target)
        except (ImportError, AttributeError, ValueError) as exc:
            raise UsageError(f"kernel {target!r} cannot be imported: {exc}") from None
        args, kwargs = _make_inputs(a.kernel, shapes[0], dtype, pool, causal)
    shape_text = " ".join(",".join(map(str, s)) for s in shapes)
    label = (
        f"{a.kernel} {shape_text} {dtype}"
        + (f" pool {pool}" if a.kernel == "conv" else "")
        + (" causal" if causal else "")
    )
    print(f"tracing {target} ({label}) on the interpreter ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    previous = set_default_options(max_instructions=a.max_instructions) if a.max_instructions else None
    try:
        with Progress(f"profile {a.kernel}"):
            est = estimate(kern, *args, numerics=a.numerics, mode=a.mode, hw=a.hw, **kwargs)
    except SimError as exc:  # the kernel broke an NKI rule: the coded error names its line
        if lifecycle.full_traceback_wanted():
            raise
        print(f"nki-kernels profile: {target} failed on the interpreter: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        if loaded is not None:  # the user's kernel: its own exception, shown with its frames
            raise lifecycle.UserCodeError(exc) from None
        # The kernel's own argument checks (sizes it does not support): a usage error.
        raise UsageError(f"{a.kernel} rejected --shape {shape_text} / --dtype {dtype}: {exc}") from None
    except Exception as exc:
        if loaded is not None:
            raise lifecycle.UserCodeError(exc) from None
        raise
    finally:
        if previous is not None:
            set_default_options(previous)
    print(f"traced + scheduled {est.n_events} instructions in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if est.steady:  # how the scheduler read the loop programs (perf/steady.py)
        print(f"  scheduler: {est.steady}", file=sys.stderr)
    # The records first, whole (temporary file + rename), then the output: a closed pipe (`| head`)
    # or a Ctrl-C while printing never costs a record or leaves half of one.
    stem_shape = tuple(shapes) if len(shapes) > 1 else shapes[0]
    stem = os.path.join(a.out, profile_stem(a.kernel, stem_shape, dtype, pool, causal, a.mode, a.hw))
    tp = write_atomically(stem + ".trace.json", est.write_chrome_trace)
    jp = write_atomically(stem + ".json", est.write_json)
    why = (
        "--dtype" if a.dtype else ("the default for your own kernel" if loaded is not None else "this kernel's default")
    )
    print(f"profile of {target}: inputs {shape_text}, {dtype} ({why}; --dtype float32|bfloat16|float16 changes it)")
    print(est.summary(top=a.top))
    print(f"timeline ({ESTIMATE_LABEL}): {tp}  (open in https://ui.perfetto.dev or chrome://tracing)")
    print(f"record: {jp}")
    return 0


# ------------------------------------------------------------------ bench
def _case_keys() -> list:
    return [c.key for c in bench.cases()]


def _check_only(only) -> list | None:
    if not only:
        return None
    keys = _case_keys()
    for s in only:
        if not s.strip():  # '' is a substring of every key: it selected everything, named the file "only-"
            raise UsageError(
                f"--only {s!r}: an empty value selects nothing; give part of a case key ({', '.join(keys)})"
            )
        if not any(s in k for k in keys):
            raise UsageError(
                f"--only {s!r} matches no bench case; each value is a substring of one of: {', '.join(keys)}"
            )
    return sorted(set(only))


def _check_bench_hw(hw: str) -> str:
    _check_hw(hw)
    if hw != "trn2" and "hw" not in inspect.signature(bench.run_bench).parameters:
        raise UsageError(
            f"--hw {hw!r}: bench estimates trn2 only (its cases are trn2 kernels); use profile --hw for another target"
        )
    return hw


def bench_suffix(mode: str, hw: str, only: Sequence[str] | None, peers: bool = False) -> str:
    """What distinguishes one bench record from another: mode, hardware, selected cases, peers or not."""
    return "_".join([mode, _hw_tag(hw)] + (["only-" + "+".join(only)] if only else []) + (["peers"] if peers else []))


def _run_bench(only, mode, hw, numerics=False, trace_dir=None):
    kw = {"hw": hw} if "hw" in inspect.signature(bench.run_bench).parameters else {}
    with Progress("bench"):
        return bench.run_bench(only, progress=sys.stderr, numerics=numerics, trace_dir=trace_dir, mode=mode, **kw)


def _write_bench_record(rows, out, mode, hw, only, peers=None) -> str:
    """``peers``: (checkouts, the records of their rows) of ``--peers``, kept under the record's "peers" key."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"bench_{bench_suffix(mode, hw, only, peers is not None)}.json")
    params: dict = {"mode": mode, "hw": hw, "only": only}
    rec = {
        "label": ESTIMATE_LABEL,
        "params": params,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rows": bench.bench_records(rows),
    }
    if peers is not None:
        params["peers"] = [c.path for c in peers[0]]
        rec["peers"] = peers[1]

    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(rec, f, indent=1, default=str)

    return write_atomically(path, write)


def cmd_bench(a: argparse.Namespace) -> int:
    only = _check_only(a.only)
    _check_bench_hw(a.hw)
    checkouts = None
    if a.peers is not None:
        from . import peers as peer_bench  # here: loaded for bench --peers only, not at every command's start

        checkouts = peer_bench.check_peers(a.peers)  # every PATH, before any work
    _check_out_dir(a.out)
    trace_dir = None
    if a.traces:  # one folder per mode/hw/selection: the traces inside are named by case key only
        trace_dir = os.path.join(a.out, f"traces_{bench_suffix(a.mode, a.hw, only)}")
        os.makedirs(trace_dir, exist_ok=True)
    t0 = time.perf_counter()
    rows = _run_bench(only, a.mode, a.hw, numerics=a.numerics, trace_dir=trace_dir)
    peer_rows, peers = None, None
    if checkouts is not None:
        with Progress("bench --peers"):
            peer_rows = peer_bench.run_peers(
                checkouts, only, progress=sys.stderr, mode=a.mode, numerics=a.numerics, hw=a.hw
            )
        peers = (checkouts, peer_bench.peer_records(peer_rows, checkouts))
    path = _write_bench_record(rows, a.out, a.mode, a.hw, only, peers)  # whole, before any output (a closed pipe)
    print(bench.render(rows))
    if checkouts is not None and peer_rows is not None:
        print()
        print(peer_bench.render_peers(peer_rows, rows, checkouts))
        print(f"(ours and peers estimated in {time.perf_counter() - t0:.0f} s)")
    print(f"\nrecord: {path}")
    if a.roofline:
        pts = [_point(r.case.key, r.est) for r in rows if r.status == "ok"]
        return _plot(pts, os.path.join(a.out, f"roofline_{bench_suffix(a.mode, a.hw, only)}.png"), a.hw)
    return 0


# ------------------------------------------------------------------ roofline
def _point(label, est):
    return point_of(label, est)


def _plot(pts, path, hw) -> int:
    try:
        write_atomically(path, lambda tmp: plot_roofline(pts, tmp, hw=hw))
    except RuntimeError as exc:  # matplotlib missing
        print(str(exc), file=sys.stderr)
        return 3
    print(f"roofline ({ESTIMATE_LABEL} points): {path}")
    return 0


def _read_record(path: str) -> dict:
    if os.path.isdir(path):
        raise UsageError(f"--from {path!r} is a directory; give JSON records (bench_*.json or profile records)")
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
        if (
            isinstance(e, dict)
            and _finite(e.get("latency_us"), low=0.0, strict=True)
            and all(_finite(e.get(k)) for k in ("flops", "hbm_bytes"))
        ):
            e = dict(e, mm_dtype=e.get("mm_dtype", ""))
            pts.append(_point(_point_label(r, e, path, len(d.get("rows", [d]))), e))
    return pts


def _finite(value: object, low: float = 0.0, strict: bool = False) -> bool:
    """A record's number the plot can use: finite and >= ``low`` (> with ``strict``); a string crashed
    the plot, NaN or a negative latency drew a point anyway."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) < float("inf"):
        return False
    return value > low if strict else value >= low


def _point_label(row: dict, est: dict, path: str, n_rows: int) -> str:
    """A bench row's case key; for a profile record (one estimate per file, whose "label" is the
    generic estimate label) its file name, which encodes kernel, shape, dtype, mode and hardware."""
    if row.get("key"):
        return str(row["key"])
    if n_rows == 1 and os.path.basename(path).endswith(".json"):
        return os.path.basename(path)[: -len(".json")]
    label = row.get("label")
    return str(est.get("kernel") or (label if label and label != ESTIMATE_LABEL else os.path.basename(path)))


_PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def _check_plot_path(path: str) -> str:
    """-o: a file name with a suffix matplotlib writes (.png if none is given), writable."""
    if os.path.isdir(path):
        raise UsageError(f"-o {path!r} is a directory; give a file name (e.g. {os.path.join(path, 'roofline.png')})")
    root, ext = os.path.splitext(path)
    if not ext:
        path = path + ".png"
    elif ext.lower() not in _PLOT_SUFFIXES:
        raise UsageError(
            f"-o {path!r}: the suffix {ext!r} is not an image format written here; allowed: "
            f"{', '.join(_PLOT_SUFFIXES)} (none: .png)"
        )
    return writable_file(path, "-o")


def _source_mtime() -> float:
    """Newest modification time of the code an estimate depends on (kernels, interpreter, model)."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest = 0.0
    for root, _, names in os.walk(pkg):
        for n in names:
            if n.endswith(".py"):
                newest = max(newest, os.path.getmtime(os.path.join(root, n)))
    return newest


def fresh_bench_record(out: str, mode: str, hw: str, only: Sequence[str] | None) -> tuple[str | None, dict | None]:
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


def cmd_roofline(a: argparse.Namespace) -> int:
    """Plot the bench kernels (a fresh bench record, or records given with --from) on the roofline."""
    only = _check_only(a.only)
    _check_hw(a.hw)
    output = (
        _check_plot_path(a.output)
        if a.output is not None
        else os.path.join(a.out, f"roofline_{bench_suffix(a.mode, a.hw, only)}.png")
    )
    if a.records is None or a.output is None:  # --out holds the bench records or the plot
        _check_out_dir(a.out)
    pts: list = []
    if a.records is not None:
        if not a.records:
            raise UsageError("--from needs at least one JSON record (bench_*.json or a profile record)")
        records = [(p, _read_record(p)) for p in a.records]  # every file checked before plotting
        for p, rec in records:
            pts += _points_of_record(rec, p, only)
        if not pts:
            raise UsageError(
                f"--from: no estimate with a finite latency_us > 0 and flops, hbm_bytes >= 0 in {', '.join(a.records)}"
            )
    else:
        path, d = (None, None) if a.rerun else fresh_bench_record(a.out, a.mode, a.hw, only)
        if path and d is not None:
            print(
                f"reusing {path} (written {d.get('created_utc', '?')}, newer than every source file; "
                "--rerun recomputes)",
                file=sys.stderr,
            )
            pts = _points_of_record(d, path, only)
        else:
            _check_bench_hw(a.hw)
            rows = _run_bench(only, a.mode, a.hw)
            written = _write_bench_record(rows, a.out, a.mode, a.hw, only)
            print(f"record: {written}", file=sys.stderr)
            pts = [_point(r.case.key, r.est) for r in rows if r.status == "ok"]
        if not pts:
            print("no kernel available to place on the roofline; plotting the roofs only", file=sys.stderr)
    return _plot(pts, output, a.hw)


# ------------------------------------------------------------------ parser
def _common(p):
    p.add_argument(
        "--mode",
        choices=("benchmark", "profile"),
        default="benchmark",
        help="benchmark = nki.benchmark latency (HW-DGE); profile = neuron-profile total_time",
    )
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


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    shapes = "; ".join(f"{k}: {v.dims}, default {v.default_shape}" for k, v in list(_KERNELS.items())[:3])
    p = subparsers.add_parser(
        "profile",
        help="cost-model ESTIMATE of one kernel: summary + Chrome trace",
        description="Estimate one kernel with the cost model (an ESTIMATE, not a measurement). "
        f"Shapes: {shapes}; calibration kernels and module:function need --shape.",
    )
    p.add_argument(
        "kernel",
        help=f"{' | '.join(_KERNELS)} | path/to/file.py:kernel | package.module:kernel "
        "(your own @nki.jit kernel, NKI 0.1 or 0.7: the file's imports pick the alias)",
    )
    p.add_argument(
        "--shape",
        action="append",
        default=None,
        help="comma-separated sizes; default: the README headline shape "
        f"({shapes}); for path/to/file.py:kernel or module:kernel one --shape per array argument",
    )
    p.add_argument(
        "--dtype",
        default=None,
        choices=DTYPES,
        help="input dtype, printed with the summary; default: float32 for path/to/file.py:kernel or "
        "module:kernel (your own kernel, as NumPy users mean floats), float16 for conv (CS149), bfloat16 for the "
        "other built-in kernels",
    )
    p.add_argument("--pool", type=int_at_least(1), default=None, help="conv only: pool size >= 1 (default 1)")
    p.add_argument("--causal", action="store_true", help="attention only: causal mask")
    p.add_argument("--numerics", action="store_true", help="also compute the outputs (slower)")
    p.add_argument("--top", type=int_in_range(0, 1000), default=8, help="kernel lines to list (0..1000)")
    add_max_instructions(p)
    p.add_argument(
        "--out",
        default="perf-out",
        help="directory for the trace and JSON record; file names encode kernel, shape, dtype, pool/causal, mode, hw",
    )
    _common(p)
    p.set_defaults(func=_guard(cmd_profile))

    b = subparsers.add_parser("bench", help="headline table of cost-model ESTIMATES vs physical limits")
    b.add_argument(
        "--only",
        nargs="+",
        metavar="KEY",
        help="substrings of case keys (conv224, conv32x16, matmul, attn); unknown ones are rejected",
    )
    b.add_argument("--numerics", action="store_true", help="also compute outputs (much slower)")
    b.add_argument(
        "--traces",
        action="store_true",
        help="write a Chrome trace per kernel into <out>/traces_<mode>_<hw>[_only-...]/",
    )
    b.add_argument("--roofline", action="store_true", help="also write roofline_<mode>_<hw>.png (needs matplotlib)")
    b.add_argument(
        "--peers",
        nargs="+",
        metavar="PATH",
        default=None,
        help="your checkouts of aws-neuron/nki-library and/or nki-samples: their public kernels that do our "
        "kernels' jobs are estimated beside ours, same model, same run (each PATH checked first)",
    )
    b.add_argument("--out", default="perf-out", help="directory for bench_<mode>_<hw>[_only-...][_peers].json")
    _common(b)
    b.set_defaults(func=_guard(cmd_bench))

    r = subparsers.add_parser(
        "roofline",
        help="roofline PNG of the bench kernels (ESTIMATES; needs matplotlib)",
        description="Reuses a bench record in --out that is newer than every source file (same --mode, "
        "--hw, --only), else runs the bench first; --from plots given records instead.",
    )
    r.add_argument(
        "--from", dest="records", nargs="*", metavar="JSON", help="JSON records (bench_*.json or profile records)"
    )
    r.add_argument("--only", nargs="+", metavar="KEY", help="substrings of bench case keys")
    r.add_argument("--rerun", action="store_true", help="recompute the bench even if a fresh record exists")
    r.add_argument("--out", default="perf-out", help="directory of the bench records (default perf-out)")
    r.add_argument("-o", "--output", default=None, help="PNG path (default <out>/roofline_<mode>_<hw>.png)")
    _common(r)
    r.set_defaults(func=_guard(cmd_roofline))
