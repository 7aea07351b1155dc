"""Selection, search and accumulator instructions (VectorE / GpSimdE).

``tensor_copy_predicated``, ``select_reduce``, ``range_select``, ``nc_match_replace8``,
``nc_find_index8``, ``tensor_scalar_cumulative``, ``sequence_bounds``, ``nc_stream_shuffle``,
``tensor_partition_reduce``.

Sources (aws-neuron-sdk): the 2.26 docstrings at 49ee15c5 ``general/nki/api/nki/isa/__init__.py``;
``tensor_scalar_cumulative`` and ``reduce_cmd.load_reduce`` from the 2.27 docstrings at 337e6041
``nki/api/nki/isa/__init__.py`` (2.26 lacks them); golden values in ``nki/test`` at 81ce03ae
(``test_nki_isa_<name>.py``).

The Vector engine's accumulator registers (one fp32 per partition) are shared by
``select_reduce``, ``range_select`` and ``tensor_scalar_cumulative`` (2.26 select_reduce note:
"The accumulator registers are shared"); they are ``RunContext.vector_acc``, for the whole run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .context import RunContext, unproven
from .errors import NKISyntaxError, SimTypeError, SimValueError
from .ops import Dst, DTypeArg, EnumArg, MaskArg, OpArg, Operand, compute_result, emit, op, record
from .ops import mask_of as mask_array
from .tensor import SBUF, Tensor
from .trace import DVE, POOL


def _opt_dtype(dtype, default, api):
    return default if dtype is None else _dt.canonical(dtype, op=api)


def _same_elems(api, ref_name, ref, **others):
    """Same partitions and elements per partition as ``ref`` (shape constraint of these ops)."""
    for arg, t in others.items():
        if t.shape[0] != ref.shape[0] or t.size != ref.size:
            raise SimValueError(
                "E011",
                api,
                arg,
                f"{arg} {t.shape} must have the same partitions and elements per partition as {ref_name} {ref.shape}",
                "Slice the operands to the same shape",
            )


def _result(
    value, dtype, op, api, engine, inputs, *, func="", mask=None, extra_writes=(), extra_reads=(), shape=None, n_ops=1
):
    return compute_result(
        value,
        dtype,
        op=op,
        api=api,
        engine=engine,
        inputs=[t for t in inputs if isinstance(t, Tensor)],
        func=func,
        mask=mask,
        extra_writes=tuple(w for w in extra_writes if w is not None),
        extra_reads=extra_reads,
        shape=shape,
        n_ops=n_ops,
    )


# ---------------------------------------------------------------------------------------
# the Vector engine accumulator registers
# ---------------------------------------------------------------------------------------

_RESET = {
    "add": 0.0,
    "subtract": 0.0,
    "multiply": 1.0,
    "maximum": -np.inf,
    "max": -np.inf,
    "minimum": np.inf,
    "min": np.inf,
}


def _acc(ctx) -> np.ndarray:
    return ctx.vector_acc


def _cmd_name(cmd, api) -> str:
    name = getattr(cmd, "name", None)
    if name is None:
        names = {0: "idle", 1: "reset", 2: "reduce", 3: "reset_reduce", 4: "load_reduce"}
        name = names.get(int(cmd)) if isinstance(cmd, (int, np.integer)) else None
    if name not in ("idle", "reset", "reduce", "reset_reduce", "load_reduce"):
        raise SimValueError(
            "E011",
            api,
            "reduce_cmd",
            f"unknown reduce_cmd {cmd!r}",
            "Use nisa.reduce_cmd.idle|reset|reduce|reset_reduce|load_reduce",
        )
    return name


def _accumulate_max(ctx, api, cmd, rows: np.ndarray, P: int, reduce_res):
    """select_reduce / range_select: per-partition max of ``rows`` (P, N) into the accumulators."""
    name = _cmd_name(cmd, api)
    if name == "load_reduce":
        raise SimValueError("E011", api, "reduce_cmd", "load_reduce is not a reduce_cmd of this instruction")
    acc = _acc(ctx)
    red = rows.max(axis=1) if rows.shape[1] else np.full(P, -np.inf, np.float32)
    if name in ("reset", "reset_reduce"):
        acc[:P] = -np.inf
    if name in ("reduce", "reset_reduce"):
        acc[:P] = np.maximum(acc[:P], red)
    if reduce_res is not None:
        if name == "idle":
            # 2.26: with reduce_cmd idle "no accumulation is performed"; the result is this instruction's own max
            reduce_res.write(red.reshape(reduce_res.shape), api=api)
        else:
            reduce_res.write(acc[:P].reshape(reduce_res.shape).copy(), api=api)


def _check_reduce_res(api, reduce_res, P):
    if reduce_res is None:
        return
    if not isinstance(reduce_res, Tensor):
        raise SimTypeError("E010", api, "reduce_res", f"reduce_res must be a ({P}, 1) tile")
    _ops.tile(reduce_res, api, "reduce_res")
    if reduce_res.shape[0] != P or _ops.free_size(reduce_res.shape) != 1:
        raise SimValueError("E011", api, "reduce_res", f"reduce_res must be ({P}, 1), got {reduce_res.shape}")
    if not _dt.is_float(reduce_res.dtype):
        raise SimTypeError("E009", api, "reduce_res", "reduce_res must have a float dtype")


def _max_only(api, reduce_op):
    name = _ops.opcode(reduce_op, api, "reduce_op")
    if name not in ("max", "maximum"):
        raise NKISyntaxError(
            "E021", api, "reduce_op", f"{name} is not supported in '{api}' (only max)", "Use reduce_op=np.max"
        )


# ---------------------------------------------------------------------------------------
# predicated copy / select
# ---------------------------------------------------------------------------------------

_PRED_DTYPES = (_dt.uint8, _dt.uint16, _dt.uint32, _dt.bool_)


@op
def tensor_copy_predicated(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    predicate: Tensor,
    reverse_pred: bool = False,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.tensor_copy_predicated",
    name: str | None = None,
) -> None:
    """Copy ``src`` into ``dst`` where ``predicate`` is true; elsewhere ``dst`` is unmodified.

    2.26: predicate uint8/uint16/uint32 (a bool tile, 1 byte, is accepted: the SDK example loads
    ``np.less_equal(a, 0.8)``); src (tile or scalar), dst, predicate have the same partitions and
    elements per partition; src and predicate not both in PSUM."""
    aname = "tensor_copy_predicated"
    dst = _ops.tile(dst, aname, "dst")
    _ops.tile(predicate, aname, "predicate")
    if predicate.dtype not in _PRED_DTYPES:
        raise SimTypeError(
            "E009",
            aname,
            "predicate",
            f"predicate dtype {_dt.name_of(predicate.dtype)} is not uint8, uint16 or uint32",
            "Cast the predicate tile to nl.uint8",
        )
    _same_elems(aname, "dst", dst, predicate=predicate)
    if isinstance(src, Tensor):
        _ops.tile(src, aname, "src")
        _same_elems(aname, "dst", dst, src=src)
        if src.buffer == "psum" and predicate.buffer == "psum":
            raise SimTypeError(
                "E007", aname, "src", "src and predicate cannot both be in PSUM", "Copy one of them to SBUF first"
            )
        v = src.read_f32().reshape(dst.shape)
    elif isinstance(src, (int, float, np.integer, np.floating)):
        v = np.float32(src)
    else:
        raise SimTypeError("E010", aname, "src", f"src must be a tile or a number, got {type(src).__name__}")
    p = np.asarray(predicate.read()).reshape(dst.shape) != 0
    if reverse_pred:
        p = ~p
    m = mask_array(mask, dst.shape, aname)
    if m is not None and m is not True:
        p = p & m if m is not False else np.zeros_like(p)
    dst.write(np.broadcast_to(v, dst.shape), p, api=aname)
    # a partial write: the untouched elements keep dst's old values (it reads dst too)
    record(
        ctx,
        _result(
            None,
            dst.dtype,
            "tensor_copy_predicated",
            api,
            DVE,
            (src, predicate),
            func="copy_predicated",
            extra_reads=(dst,),
            shape=dst._shape,
        ),
        dst,
    )


@op
def select_reduce(
    ctx: RunContext,
    dst: Dst,
    predicate: Tensor,
    on_true: Tensor,
    on_false: Operand,
    reduce_res: Tensor | None = None,
    reduce_cmd: EnumArg = None,
    reduce_op: OpArg = np.amax,
    reverse_pred: bool = False,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.select_reduce",
    name: str | None = None,
) -> None:
    """``dst = where(predicate, on_true, on_false)``, optionally max-reduced per partition (2.26)."""
    aname = "select_reduce"
    dst = _ops.tile(dst, aname, "dst")
    _ops.tile(predicate, aname, "predicate")
    _ops.tile(on_true, aname, "on_true")
    _same_elems(aname, "on_true", on_true, dst=dst, predicate=predicate)
    if on_true.buffer == "psum" and predicate.buffer == "psum":
        raise SimTypeError("E007", aname, "on_true", "on_true and predicate cannot both be in PSUM")
    if on_true.dtype in (_dt.tfloat32, _dt.int32, _dt.uint32):
        raise SimTypeError(
            "E009",
            aname,
            "on_true",
            f"on_true dtype {_dt.name_of(on_true.dtype)} is not supported (any dtype except tfloat32, int32, uint32)",
        )
    if not (_dt.is_int(predicate.dtype) or predicate.dtype == _dt.bool_):
        raise SimTypeError("E009", aname, "predicate", "predicate must have an integer dtype (int8/uint8/int16/uint16)")
    _max_only(aname, reduce_op)
    P = on_true.shape[0]
    _check_reduce_res(aname, reduce_res, P)
    if isinstance(on_false, Tensor):
        _ops.tile(on_false, aname, "on_false")
        if on_false.shape[0] != P or _ops.free_size(on_false.shape) != 1:
            raise SimValueError("E011", aname, "on_false", f"a tile on_false must be ({P}, 1), got {on_false.shape}")
        f = on_false.read_f32().reshape(P, 1)
    elif isinstance(on_false, (int, float, np.integer, np.floating)):
        f = np.float32(on_false)
    else:
        raise SimTypeError("E010", aname, "on_false", "on_false must be a scalar or a (P, 1) tile")
    p = np.asarray(predicate.read()).reshape(P, -1) != 0
    if reverse_pred:
        p = ~p
    r = np.where(p, on_true.read_f32().reshape(P, -1), f).astype(np.float32)
    m = mask_array(mask, dst.shape, aname)
    dst.write(r.reshape(dst.shape), m, api=aname)
    if reduce_res is not None or reduce_cmd not in (None, 0):
        _accumulate_max(ctx, aname, 0 if reduce_cmd is None else reduce_cmd, r, P, reduce_res)
    record(
        ctx,
        _result(
            None,
            dst.dtype,
            "select_reduce",
            api,
            DVE,
            (predicate, on_true, on_false),
            func="select",
            extra_writes=(reduce_res,),
            shape=dst._shape,
        ),
        dst,
    )


_RANGE_CMP = ("equal", "less", "less_equal", "greater", "greater_equal")


@op
def range_select(
    ctx: RunContext,
    dst: Dst,
    on_true_tile: Tensor,
    comp_op0: OpArg,
    comp_op1: OpArg,
    bound0: Tensor,
    bound1: Tensor,
    reduce_cmd: EnumArg = None,
    reduce_res: Tensor | None = None,
    reduce_op: OpArg = np.amax,
    range_start: int = 0,
    on_false_value: Operand = None,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.range_select",
    name: str | None = None,
) -> Tensor | None:
    """Keep elements whose free index + range_start satisfies both comparisons, else on_false_value.

    2.26 NumPy equivalent: ``idx = range_start + arange(N)``; ``m = op0(idx, bound0) & op1(idx, bound1)``;
    ``where(m, on_true_tile, on_false_value)``; max-reduced per partition into the accumulators."""
    aname = "range_select"
    _ops.tile(on_true_tile, aname, "on_true_tile")
    if not _dt.is_float(on_true_tile.dtype):
        raise SimTypeError("E009", aname, "on_true_tile", "on_true_tile must have a float dtype")
    P = on_true_tile.shape[0]
    bounds = []
    for arg, b in (("bound0", bound0), ("bound1", bound1)):
        if not isinstance(b, Tensor):
            raise SimTypeError("E010", aname, arg, f"{arg} must be a ({P}, 1) float32 tile")
        _ops.tile(b, aname, arg)
        if b.shape[0] != P or _ops.free_size(b.shape) != 1:
            raise SimValueError(
                "E011", aname, arg, f"{arg} must have one element per partition ({P}, 1), got {b.shape}"
            )
        if b.dtype != _dt.float32:
            raise SimTypeError("E009", aname, arg, f"{arg} must be float32, got {_dt.name_of(b.dtype)}")
        bounds.append(b.read_f32().reshape(P, 1))
    ops = []
    for arg, cop in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        name = _ops.opcode(cop, aname, arg)
        if name not in _RANGE_CMP:
            raise NKISyntaxError(
                "E021",
                aname,
                arg,
                f"{name} is not a comparison range_select supports",
                "Use np.equal, np.less, np.less_equal, np.greater or np.greater_equal",
            )
        ops.append(_ops.BINARY[name])
    _max_only(aname, reduce_op)
    _check_reduce_res(aname, reduce_res, P)
    fill = np.float32(
        np.finfo(np.float32).min if on_false_value is None else _ops.number(on_false_value, aname, "on_false_value")
    )
    x = on_true_tile.read_f32().reshape(P, -1)
    idx = (int(range_start) + np.arange(x.shape[1], dtype=np.float32))[None, :]
    keep = ops[0](idx, bounds[0]) & ops[1](idx, bounds[1])
    r = np.where(keep, x, fill).astype(np.float32)
    if reduce_res is not None or reduce_cmd not in (None, 0):
        _accumulate_max(ctx, aname, 0 if reduce_cmd is None else reduce_cmd, r, P, reduce_res)
    res = _result(
        r.reshape(on_true_tile.shape),
        _opt_dtype(dtype, on_true_tile.dtype, aname),
        "range_select",
        api,
        DVE,
        (on_true_tile, bound0, bound1),
        func="range_select",
        extra_writes=(reduce_res,),
        mask=mask_array(mask, on_true_tile.shape, aname),
    )
    return emit(ctx, dst, res)


# ---------------------------------------------------------------------------------------
# top-8 search
# ---------------------------------------------------------------------------------------


def _eight_vals(api, vals, P):
    _ops.tile(vals, api, "vals")
    if vals.shape[0] != P or _ops.free_size(vals.shape) != 8:
        raise SimValueError(
            "E011",
            api,
            "vals",
            f"vals must have exactly 8 elements per partition and {P} partitions, got {vals.shape}",
            "Pass the (P, 8) result of nisa.max8",
        )
    if vals.ndim > 3:
        raise SimValueError("E011", api, "vals", f"vals can be up to 3-dimensional, got {vals.ndim}")
    return vals.read_f32().reshape(P, 8)


def _first_matches(data2d, valid, vals, order=range(8)):
    """Index of the first not-yet-matched occurrence of each value, per partition (-1: none); the 8
    values are visited in ``order`` (a repeated value takes the next occurrence)."""
    P, N = data2d.shape
    free = valid.copy()
    idx = np.full((P, 8), -1, dtype=np.int64)
    rows = np.arange(P)
    for j in order:  # 8 vectorised steps over all partitions
        hit = free & (data2d == vals[:, j : j + 1])
        found = hit.any(axis=1)
        first = np.argmax(hit, axis=1)
        idx[found, j] = first[found]
        free[rows[found], first[found]] = False
    return idx


@op
def nc_find_index8(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    vals: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.nc_find_index8",
    spec: str = "0.1",
    name: str | None = None,
) -> Tensor | None:
    """Indices (first occurrence, per partition; a repeated value takes the next occurrence) of the 8
    ``vals`` in ``data`` -> (P, 8) uint32 (or uint16).

    2.26: data up to 5-D with 8..16384 elements per partition; a mask applies to data only.  Values
    absent from data: all ones (NKI 0.6 isa nc_find_index8, RN 0.6 "nki.simulate correctness fixes");
    ``spec`` "0.1": the 2.26 docs are silent, so also a hardware-unproven construct (a SimWarning, E024
    under strict; decision, docs/nki-0.1-rules.md isa.find_index8_absent)."""
    aname = "nc_find_index8"
    _ops.tile(data, aname, "data")
    P = data.shape[0]
    n = _ops.free_size(data.shape)
    if not 8 <= n <= 16384 or data.ndim > 5:
        raise SimValueError(
            "E011",
            aname,
            "data",
            f"data must have 8..16384 elements per partition and at most 5 axes, got {data.shape}",
            got=n,
            limit=16384,
        )
    v = _eight_vals(aname, vals, P)
    d = _opt_dtype(dtype, dst.dtype if isinstance(dst, Tensor) else _dt.uint32, aname)
    if d not in (_dt.uint16, _dt.uint32):
        raise SimTypeError(
            "E009",
            aname,
            "dst" if isinstance(dst, Tensor) else "dtype",
            f"output dtype must be uint16 or uint32, got {_dt.name_of(d)}",
        )
    m = mask_array(mask, data.shape, aname)
    valid = np.ones((P, n), bool) if m is None or m is True else np.broadcast_to(m, data.shape).reshape(P, n)
    idx = _first_matches(data.read_f32().reshape(P, n), valid, v)
    if (idx < 0).any():
        if spec == "0.1":
            p, j = (int(x) for x in np.argwhere(idx < 0)[0])
            unproven(
                "isa.find_index8_absent",
                f"nc_find_index8: value {v[p, j]} (partition {p}, slot {j}) does not "
                "occur in data; SDK 2.26 leaves the result undefined (NKI 0.6 documents all ones, used here); "
                "search only for values taken from data (nisa.max8)",
            )
        idx[idx < 0] = np.iinfo(d).max
    res = _result(idx.astype(np.int64), d, "nc_find_index8", api, DVE, (data, vals), func="find_index8")
    return emit(ctx, dst, res)


@op
def nc_match_replace8(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    vals: Tensor,
    imm: Operand,
    dst_idx: Tensor | None = None,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.nc_match_replace8",
    spec: str = "0.1",
    name: str | None = None,
) -> Tensor | None:
    """Replace the first occurrence of each of the 8 ``vals`` in ``data`` with ``imm``; the positions
    of the matches go to ``dst_idx`` when given.  A mask applies to data: masked-out elements are
    neither matched nor written.  ``spec`` "0.1": values visited in order, an unmatched slot of
    ``dst_idx`` is 0 (2.26 NumPy equivalent in the docstring); "0.6": visited in reverse order, an
    unmatched slot is all ones (NKI 0.6 isa nc_match_replace8)."""
    aname = "nc_match_replace8"
    _ops.tile(data, aname, "data")
    P = data.shape[0]
    n = _ops.free_size(data.shape)
    if n > 16384 or data.ndim > 5:
        raise SimValueError(
            "E011",
            aname,
            "data",
            f"data must have at most 16384 elements per partition and at most 5 axes, got {data.shape}",
            got=n,
            limit=16384,
        )
    v = _eight_vals(aname, vals, P)
    m = mask_array(mask, data.shape, aname)
    valid = np.ones((P, n), bool) if m is None or m is True else np.broadcast_to(m, data.shape).reshape(P, n)
    x = data.read_f32().reshape(P, n).copy()
    idx = _first_matches(x, valid, v, range(8) if spec == "0.1" else range(7, -1, -1))
    rows, cols = np.nonzero(idx >= 0)
    x[rows, idx[rows, cols]] = np.float32(_ops.number(imm, aname, "imm"))
    if dst_idx is not None:
        _ops.tile(dst_idx, aname, "dst_idx")
        if dst_idx.shape[0] != P or _ops.free_size(dst_idx.shape) != 8:
            raise SimValueError("E011", aname, "dst_idx", f"dst_idx must be ({P}, 8), got {dst_idx.shape}")
        unmatched = 0 if spec == "0.1" else np.iinfo(np.uint32).max
        dst_idx.write(np.where(idx >= 0, idx, unmatched).reshape(dst_idx.shape), api=aname)
    d = _opt_dtype(dtype, dst.dtype if isinstance(dst, Tensor) else data.dtype, aname)
    res = _result(
        x.reshape(data.shape),
        d,
        "nc_match_replace8",
        api,
        DVE,
        (data, vals),
        func="match_replace8",
        mask=m,
        extra_writes=(dst_idx,),
    )
    return emit(ctx, dst, res)


# ---------------------------------------------------------------------------------------
# scans
# ---------------------------------------------------------------------------------------

_CUM_OPS = ("add", "subtract", "multiply", "maximum", "max", "minimum", "min")
_CUM_DTYPES = (
    _dt.bfloat16,
    _dt.float16,
    _dt.float32,
    _dt.float8_e4m3,
    _dt.float8_e5m2,
    _dt.uint8,
    _dt.uint16,
    _dt.int8,
    _dt.int16,
)


def _imm(x, P, api, arg):
    if isinstance(x, Tensor):
        _ops.tile(x, api, arg)
        if x.shape[0] != P or _ops.free_size(x.shape) != 1:
            raise SimValueError("E011", api, arg, f"a tile {arg} must be ({P}, 1), got {x.shape}")
        return x.read_f32().reshape(P)
    if isinstance(x, (int, float, np.integer, np.floating)):
        return np.full(P, np.float32(x), np.float32)
    raise SimTypeError("E010", api, arg, f"{arg} must be a float32 scalar or a ({P}, 1) tile, got {type(x).__name__}")


@op
def tensor_scalar_cumulative(
    ctx: RunContext,
    dst: Dst,
    src: Tensor | None = None,
    op0: OpArg = None,
    op1: OpArg = None,
    imm0: Operand = None,
    imm1: Operand = None,
    reduce_cmd: EnumArg = None,
    *,
    reverse0: bool = False,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.tensor_scalar_cumulative",
    name: str | None = None,
) -> None:
    """Per partition: ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` over the flattened free axis.

    2.27 docstring (337e6041): reduce_cmd reset_reduce (the default) starts reg at op1's identity
    (0 for add/subtract, 1 for multiply, -inf for max, +inf for min), load_reduce at ``imm1``,
    reduce continues from the accumulator registers (shared with other VectorE accumulations).
    The operand order ``op1(value, reg)`` is the docstring's pseudocode."""
    aname = "tensor_scalar_cumulative"
    if dst is None or src is None:
        raise SimTypeError("E010", aname, "dst" if dst is None else "src", "dst= and src= are required")
    dst = _ops.tile(dst, aname, "dst")
    src = _ops.tile(src, aname, "src")
    for arg, t in (("dst", dst), ("src", src)):
        if t.dtype not in _CUM_DTYPES:
            raise SimTypeError(
                "E009",
                aname,
                arg,
                f"dtype {_dt.name_of(t.dtype)} is not supported (2.27: BF16, FP16, "
                "FP32, FP8, UINT8, UINT16, INT8, INT16; not INT32/UINT32)",
            )
    _same_elems(aname, "src", src, dst=dst)
    n0 = _ops.opcode(op0, aname, "op0")
    n1 = _ops.opcode(op1, aname, "op1")
    if n0 not in _ops.BINARY or n0 in _ops.COMPARE:
        raise NKISyntaxError("E021", aname, "op0", f"{n0} is not an arithmetic op", "Use e.g. nl.add, nl.multiply")
    if n1 not in _CUM_OPS:
        raise NKISyntaxError(
            "E021",
            aname,
            "op1",
            f"{n1} is not supported as the cumulative op",
            "Use add, subtract, multiply, max or min",
        )
    P = src.shape[0]
    cmd = _cmd_name(3 if reduce_cmd is None else reduce_cmd, aname)
    acc = _acc(ctx)
    if cmd in ("reset", "reset_reduce"):
        acc[:P] = _RESET[n1]
    elif cmd == "load_reduce":
        if imm1 is None:
            raise SimValueError("E011", aname, "imm1", "reduce_cmd=load_reduce needs imm1 (the initial accumulator)")
        acc[:P] = _imm(imm1, P, aname, "imm1")
    i0 = _imm(imm0, P, aname, "imm0")[:, None]
    x = src.read_f32().reshape(P, -1)
    f0, f1 = _ops.BINARY[n0], _ops.BINARY[n1]
    y = (f0(i0, x) if reverse0 else f0(x, i0)).astype(np.float32)
    out = np.empty_like(y)
    reg = acc[:P].copy()
    if cmd != "idle":
        for i in range(y.shape[1]):  # a true recurrence: one vectorised step over partitions per element
            reg = f1(y[:, i], reg).astype(np.float32)
            out[:, i] = reg
        acc[:P] = reg
    else:
        out[:] = y
    dst.write(out.reshape(dst.shape), mask_array(mask, dst.shape, aname), api=aname)
    record(
        ctx,
        _result(
            None,
            dst.dtype,
            "tensor_scalar_cumulative",
            api,
            DVE,
            (src, imm0, imm1),
            n_ops=2,
            func=f"{n0},{n1}",
            shape=dst._shape,
        ),
        dst,
    )


@op
def sequence_bounds(
    ctx: RunContext,
    dst: Dst,
    segment_ids: Tensor,
    *,
    dtype: DTypeArg = None,
    api: str = "nisa.sequence_bounds",
    name: str | None = None,
) -> Tensor | None:
    """(1, N) segment ids -> (1, 2, N): [start, end) of each element's segment (GpSimd).

    2.26: partition dim 1; ids float32 or int32; id 0 is padding (start N, end -1); output
    dtype float32 or int32 (default: the input's).  NumPy reference in test_nki_isa_sequence_bounds.py:
    start = index of the first element of the run of equal ids, end = one past its last."""
    aname = "sequence_bounds"
    _ops.tile(segment_ids, aname, "segment_ids")
    if segment_ids.shape[0] != 1:
        raise SimValueError(
            "E011",
            aname,
            "segment_ids",
            f"the partition dimension must be 1, got {segment_ids.shape}",
            got=segment_ids.shape[0],
            limit=1,
        )
    if segment_ids.dtype not in (_dt.float32, _dt.int32):
        raise SimTypeError("E009", aname, "segment_ids", "segment_ids must be float32 or int32")
    d = _opt_dtype(dtype, segment_ids.dtype, aname)
    if d not in (_dt.float32, _dt.int32):
        raise SimTypeError("E009", aname, "dtype", "the output dtype must be float32 or int32")
    s = segment_ids.read_f32().reshape(-1)
    n = s.size
    pos = np.arange(n)
    new_run = np.ones(n, bool)
    new_run[1:] = s[1:] != s[:-1]
    start = np.maximum.accumulate(np.where(new_run, pos, 0))
    end_run = np.ones(n, bool)
    end_run[:-1] = s[:-1] != s[1:]
    end = np.minimum.accumulate(np.where(end_run, pos + 1, n)[::-1])[::-1]
    pad = s == 0
    start = np.where(pad, n, start)
    end = np.where(pad, -1, end)
    r = np.stack([start, end]).astype(np.float32).reshape(1, 2, n)
    return emit(
        ctx,
        dst,
        _result(
            r if _dt.is_float(d) else r.astype(np.int64),
            d,
            "sequence_bounds",
            api,
            POOL,
            (segment_ids,),
            func="sequence_bounds",
        ),
    )


# ---------------------------------------------------------------------------------------
# cross-partition
# ---------------------------------------------------------------------------------------


@op
def nc_stream_shuffle(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    shuffle_mask: Sequence[int],
    *,
    dtype: DTypeArg = None,
    mask: MaskArg = None,
    api: str = "nisa.nc_stream_shuffle",
    name: str | None = None,
) -> None:
    """Within each 32-partition quadrant, ``dst[i] = src[shuffle_mask[i]]`` (255: leave dst[i]).

    2.26: src/dst in SBUF or PSUM, same dtype and elements per partition, in place allowed; the
    same 32-entry mask applies to every quadrant; ``mask=`` applies to dst; start partitions follow
    the active-partition rule (96/128 -> 0; 64 -> 0/64; 32 -> 0/32/64/96)."""
    aname = "nc_stream_shuffle"
    _ops.tile(src, aname, "src")
    dst = _ops.tile(dst, aname, "dst")
    if src.dtype != dst.dtype:
        raise SimTypeError(
            "E009", aname, "dst", f"dst dtype {_dt.name_of(dst.dtype)} must match src {_dt.name_of(src.dtype)}"
        )
    if _ops.free_size(src.shape) != _ops.free_size(dst.shape):
        raise SimValueError(
            "E011", aname, "dst", f"dst {dst.shape} must have as many elements per partition as src {src.shape}"
        )
    sm = list(shuffle_mask)
    if len(sm) != 32:
        raise SimValueError("E011", aname, "shuffle_mask", f"shuffle_mask must have 32 entries, got {len(sm)}")
    sm = [int(v) for v in sm]
    if any(not (0 <= v < 32 or v == 255) for v in sm):
        raise SimValueError(
            "E011", aname, "shuffle_mask", "each entry must be a partition 0..31 of the quadrant or 255", f"got {sm}"
        )
    ps, pd = src.shape[0], dst.shape[0]
    active = -(-max(ps, pd) // 32) * 32
    allowed = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}[active]
    for arg, t in (("src", src), ("dst", dst)):
        start = _start_partition(t)
        if start is not None and start not in allowed:
            raise SimValueError(
                "E011",
                aname,
                arg,
                f"start partition {start} is not allowed with {active} active partitions (allowed: {allowed})",
                "Start the access at a quadrant boundary",
            )
    x = src.read_f32().reshape(ps, -1)
    r = np.zeros((pd, x.shape[1]), np.float32)  # rows not in `write` are never stored
    write = np.zeros((pd, 1), bool)
    for i in range(pd):
        k = sm[i % 32]
        if k == 255:
            continue
        s = (i // 32) * 32 + k
        if s >= ps:
            raise SimValueError(
                "E011",
                aname,
                "shuffle_mask",
                f"destination partition {i} reads source partition {s}, but src has {ps} partitions",
            )
        r[i] = x[s]
        write[i] = True
    m = mask_array(mask, dst.shape, aname)
    w = np.broadcast_to(write.reshape((pd,) + (1,) * (dst.ndim - 1)), dst.shape)
    if m is not None and m is not True:
        w = w & m if m is not False else np.zeros_like(w)
    dst.write(r.reshape(dst.shape), w, api=aname)
    record(
        ctx,
        _result(
            None,
            dst.dtype,
            "nc_stream_shuffle",
            api,
            DVE,
            (src,),
            func="shuffle",
            extra_reads=(dst,) if 255 in sm else (),
            shape=dst._shape,
        ),
        dst,
    )


def _start_partition(t: Tensor):
    """First partition a basic on-chip view touches (None when it cannot be told)."""
    if t.arr is None:
        k = t.key[0] if t.key else None
        return int(np.min(k)) if isinstance(k, np.ndarray) and k.size else (k if isinstance(k, int) else None)
    row = t.alloc.row_bytes
    if not row:
        return None
    return (t.off // row) if t.alloc.par_axis == 0 else None


# ---------------------------------------------------------------------------------------
# loop reduction
# ---------------------------------------------------------------------------------------

_LOOP_REDUCE_OPS = ("add", "multiply", "maximum", "max", "minimum", "min", "subtract")


@op
def loop_reduce(
    ctx: RunContext,
    dst: Dst,
    x: Tensor,
    op: OpArg,
    acc: Tensor | None = None,
    *,
    dtype: DTypeArg = None,
    mask: MaskArg = None,
    api: str = "nl.loop_reduce",
) -> Tensor | None:
    """``b = nl.loop_reduce(a, op, loop_indices)`` is ``b = nisa.tensor_tensor(data1=b, data2=a, op)``
    (2.26 language docs: "The destination tile is also the rhs input to ``op``"); ``acc``: the
    destination's current tile (the front end finds it), None when it is not bound yet -- then the
    result is ``x`` itself (cast to dtype)."""
    aname = "loop_reduce"
    _ops.tile(x, aname, "x")
    name = _ops.opcode(op, aname)
    if name not in _LOOP_REDUCE_OPS:
        raise NKISyntaxError(
            "E021",
            aname,
            "op",
            f"{name} is not supported in 'loop_reduce'",
            "Use an arithmetic reduce op such as np.add or np.maximum",
        )
    v = x.read_f32()
    inputs = [x]
    if isinstance(acc, Tensor) and _never_written(acc):
        # A destination nothing has written yet starts the reduction with x: neuronx-cc's own generated kernels
        # (AccelOpt's NKIBench, decompiled compiler output that ran on trn1/trn2) loop_reduce into an nl.ndarray
        # without initialising it.  A destination written before the loop (the docstring's nl.zeros) is reduced
        # into as the docstring says.
        acc = None
    if isinstance(acc, Tensor):
        _ops.tile(acc, aname, "destination")
        if acc.shape != x.shape and acc.shape[0] == x.shape[0] and acc.size == x.size:
            v = v.reshape(acc.shape)  # partition-first: a (P,) tile is the (P, 1) tile (spec corrections 7)
        elif acc.shape != x.shape:
            raise SimValueError(
                "E011",
                aname,
                "destination",
                f"destination {acc.shape} and x {x.shape} differ",
                "Reduce into a tile of x's shape",
            )
        v = _ops.BINARY[name](acc.read_f32(), v).astype(np.float32)
        inputs.insert(0, acc)
    d = _opt_dtype(dtype, x.dtype if not isinstance(acc, Tensor) else acc.dtype, aname)
    res = _result(
        np.ascontiguousarray(v), d, "tensor_tensor", api, DVE, inputs, func=name, mask=mask_array(mask, x.shape, aname)
    )
    return emit(ctx, dst, res)


def _never_written(t: Tensor) -> bool:
    """Does every element of ``t`` still hold the never-written poison (False when the dtype cannot tell)?"""
    if not t.alloc.unwritten:
        return False
    pm = _dt.poison_mask(t.read_raw())
    return pm is not None and bool(pm.all())


@op
def nonzero_with_count(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    index_offset: int = 0,
    padding_val: int = -1,
    *,
    api: str = "nisa.nonzero_with_count",
    name: str | None = None,
) -> None:
    """Per GpSimd core (partitions 0, 16, ..., 112 only): the indices (+ index_offset) of the non-zero
    elements, padding_val, and the count in the last slot; other partitions of dst are untouched
    (NKI 0.6 isa ``nonzero_with_count``)."""
    aname = "nonzero_with_count"
    dst = _ops.tile(dst, aname, "dst", buffers=(SBUF,))
    _ops.tile(src, aname, "src", buffers=(SBUF,))
    if src.dtype not in (_dt.float32, _dt.int32) or dst.dtype != _dt.int32:
        raise SimTypeError("E009", aname, "dst", "src must be float32/int32 and dst int32")
    P, T = src.shape[0], _ops.free_size(src.shape)
    if dst.shape[0] != P or _ops.free_size(dst.shape) != T + 1:
        raise SimValueError("E011", aname, "dst", f"dst must be ({P}, {T + 1}) for src {src.shape}")
    rows = list(range(0, P, 16))
    x = np.asarray(src.read()).reshape(P, T)
    r = np.zeros((P, T + 1), np.int64)
    for p in rows:
        nz = np.flatnonzero(x[p])
        r[p] = int(padding_val)
        r[p, : nz.size] = nz + int(index_offset)
        r[p, T] = nz.size
    sel = np.zeros((P, 1), bool)
    sel[rows] = True
    dst.write(r.reshape(dst.shape), np.broadcast_to(sel.reshape((P,) + (1,) * (dst.ndim - 1)), dst.shape), api=aname)
    record(
        ctx, _result(None, dst.dtype, "nonzero_with_count", api, POOL, (src,), func="nonzero", shape=dst._shape), dst
    )
