"""Reductions: ``tensor_reduce``, the ``nl.*`` reductions, per-partition statistics (``bn_stats``,
``bn_aggr``, ``max8``), ``tensor_partition_reduce`` and the ``nl.softmax`` / ``nl.rms_norm``
compositions (spec §9, Corrections 3; docs/nki-0.7-spec.md I9, L6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dtypes as dt
from . import engines, limits
from .context import RunContext, lenient, unproven
from .errors import NKISyntaxError, SimTypeError, SimValueError
from .ops import (
    REDUCE,
    AxisArg,
    Dst,
    DTypeArg,
    MaskArg,
    OpArg,
    compute_result,
    device_mean,
    device_sum,
    device_var,
    emit,
    free_size,
    mask_of,
    masked_reduce,
    op,
    opcode,
    reduce_out_mask,
    reduce_values,
    tile,
)
from .tensor import Tensor
from .trace import DVE, POOL
from .vector import binary, unary


def _dtype(dtype, default, api):
    return default if dtype is None else dt.canonical(dtype, op=api)


def _reduce_axes(data, axis, api):
    """Free axes to reduce; negative axes normalise as in NumPy (spec Corrections 3)."""
    ax = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ax = tuple(int(a) + data.ndim if -data.ndim < a < 0 else int(a) for a in ax)
    for a in ax:
        if a <= 0 or a >= data.ndim:
            raise SimValueError(
                "E023",
                api,
                "axis",
                f"axis {a} is not a free axis of a tile of rank {data.ndim}"
                + (" (the partition axis cannot be reduced)" if a == 0 else "")
                + (" (negative axes are not supported)" if a < 0 else ""),
                f"Use free axes 1..{data.ndim - 1}",
            )
    return ax


def _trailing_axes(data, axis, api):
    """NKI 0.6 (MIG "tensor_reduce -- axis handling fix"): the last contiguous free axes, never 0."""
    ax = (int(axis),) if isinstance(axis, (int, np.integer)) else tuple(int(a) for a in axis)
    nd = data.ndim
    ax = tuple(sorted(a % nd if a < 0 else a for a in ax))
    if 0 in ax:
        raise SimValueError(
            "E023",
            api,
            "axis",
            "the partition axis (0) cannot be reduced",
            "Transpose first, or use nisa.tensor_partition_reduce",
        )
    if ax != tuple(range(nd - len(ax), nd)):
        raise SimValueError(
            "E023",
            api,
            "axis",
            f"reduction axes {ax} must be the last contiguous free axes of a rank-{nd} tile (NKI 0.3 axis handling)",
            f"e.g. axis={tuple(range(nd - len(ax), nd))}",
        )
    return ax


@op
def tensor_reduce(
    ctx: RunContext,
    dst: Dst,
    op: OpArg,
    data: Tensor,
    axis: AxisArg,
    negate: bool = False,
    keepdims: bool = False,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.tensor_reduce",
    spec: str = "0.1",
    name: str | None = None,
) -> Tensor | None:
    """Reduce free axes with ``op`` on VectorE; fp32 arithmetic.  ``spec`` "0.1": any set of up to four
    free axes (SDK 2.26 isa tensor_reduce; non-consecutive axes warn), "0.6": the trailing free axes."""
    aname = "tensor_reduce"
    tile(data, aname, "data")
    name_ = opcode(op, aname)
    engines.check_reduce(aname, "op", name_)
    if name_ not in REDUCE:
        raise NKISyntaxError(
            "E021",
            aname,
            "op",
            f"{name_} is not supported in 'tensor_reduce'",
            "Use nl.add, nl.multiply, nl.max/maximum, nl.min/minimum, bitwise or logical ops",
        )
    if spec == "0.6":
        ax = _trailing_axes(data, axis, aname)
    else:
        ax = _reduce_axes(data, axis, aname)
        s_ax = sorted(ax)
        if len(ax) > 4:
            # "The reduction axes can contain up to four free axes" (SDK 2.26 isa tensor_reduce)
            raise SimValueError(
                "E023",
                aname,
                "axis",
                f"reduction axes {tuple(ax)}: at most four free axes (SDK 2.26 isa tensor_reduce)",
                "Reduce in two steps",
                got=len(ax),
                limit=4,
            )
        if s_ax != list(range(s_ax[0], s_ax[0] + len(s_ax))):
            # The 2.26 doc says the axes "must be consecutive ... [1, 3, 4] is not" legal, but the
            # toolchain accepts non-adjacent axes on trn2: aws-neuron-sdk#1257 (the compiler reorders
            # them internally) and CS149 F25 solutions that passed on trn2 with axis=(2, 4) (spec §9).
            # Accept, warn; an error (E024) under strict.
            unproven(
                "isa.reduce_axes",
                f"tensor_reduce over non-consecutive axes {tuple(ax)}: the 2.26 doc requires "
                "consecutive axes, the compiler accepts and reorders them (aws-neuron-sdk#1257); reduce "
                "consecutive axes to follow the doc",
            )
    bit = name_.startswith("bitwise")
    if bit:
        # ISA tensor_reduce (SDK 2.26 isa docstring): "For bitvec operators, the input/output data types
        # must be integer types"
        for what, d in (("data", data.dtype), ("dtype", dtype)):
            if d is not None and not dt.is_int(dt.canonical(d, op=aname)):
                raise SimTypeError(
                    "E009",
                    aname,
                    what,
                    f"a bitvec reduction ({name_}) needs integer input and "
                    f"output types, got {dt.name_of(dt.canonical(d, op=aname))} {what}",
                    "Load/cast the tile to an integer type (nl.load(x, dtype=nl.int32)) and pass dtype=nl.int32",
                    got=dt.name_of(dt.canonical(d, op=aname)),
                    limit="an integer type",
                )
    if negate and (bit or name_.startswith("logical")):
        raise NKISyntaxError("E021", aname, "negate", "negate is only valid for arithmetic reduce ops")
    fn = REDUCE[name_]
    m = mask_of(mask, data.shape, aname)  # mask= selects the inputs (spec Corrections 3)
    if bit:
        if m is not None and m is not True:
            raise SimValueError(
                "E011",
                aname,
                "mask",
                "a mask on a bitwise tensor_reduce is not supported here",
                "Slice the input instead",
            )
        r = data.read().astype(np.int64)
        for a in sorted(ax, reverse=True):
            r = fn(r, axis=a)
        if keepdims:
            r = np.expand_dims(r, tuple(sorted(ax)))
    else:
        if m is None or m is True:
            r = np.asarray(reduce_values(name_, data.read_f32(), ax, keepdims), dtype=np.float32)
        else:
            r = masked_reduce(name_, data.read_f32(m), ax, keepdims, m)
        if negate:
            r = -r
    om = None if m is None or m is True else reduce_out_mask(m, ax, keepdims)
    res = compute_result(
        np.ascontiguousarray(r),
        _dtype(dtype, data.dtype, aname),
        op="tensor_reduce",
        api=api,
        engine=DVE,
        inputs=(data,),
        mask=om,
        func=name_,
        axes=len(ax),
    )
    return emit(ctx, dst, res)


def _axes(x, axis, api):
    """Reduction axes; negative axes normalise as in NumPy (2.26 nl.sum is "similar to numpy.sum";
    spec Corrections 3); the partition axis stays illegal."""
    ax = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ax = tuple(int(a) + x.ndim if -x.ndim <= a < 0 else int(a) for a in ax)
    for a in ax:
        if a < 0:
            raise SimValueError(
                "E023",
                api,
                "axis",
                f"axis {a - x.ndim} out of range for a tile of rank {x.ndim}",
                f"Name free axes (1..{x.ndim - 1} or -1..{1 - x.ndim})",
            )
        if a == 0:
            raise SimValueError(
                "E023",
                api,
                "axis",
                "cannot reduce the partition axis (axis 0)",
                "Reduce free axes only; transpose first to reduce across partitions",
            )
        if a >= x.ndim:
            raise SimValueError(
                "E023", api, "axis", f"axis {a} out of range for a tile of rank {x.ndim}", got=a, limit=x.ndim - 1
            )
    return ax


_NL_REDUCE: dict[str, Callable[..., Any]] = {  # sum/mean/var add in the device's order (ops.device_sum)
    "sum": device_sum,
    "max": np.max,
    "min": np.min,
    "mean": device_mean,
    "prod": np.prod,
    "var": device_var,
    "all": lambda a, axis, keepdims: np.all(a != 0, axis=axis, keepdims=keepdims),
}


@op
def reduce(
    ctx: RunContext,
    dst: Dst,
    name: str,
    x: Tensor,
    axis: AxisArg,
    *,
    dtype: DTypeArg = None,
    mask: MaskArg = None,
    keepdims: bool = False,
    api: str | None = None,
) -> Tensor | None:
    """``nl.<name>(x, axis)`` for name in sum/max/min/mean/prod/var/all: a VectorE tensor_reduce; its
    mask selects the inputs (spec Corrections 3)."""
    tile(x, name, "x")
    ax = _axes(x, axis, name)
    m = mask_of(mask, x.shape, name)
    v = x.read_f32(m)
    om = None
    if m is None or m is True:
        if name in ("max", "min"):
            r = np.asarray(reduce_values(name, v, ax, keepdims), dtype=np.float32)
        else:
            r = np.asarray(_NL_REDUCE[name](v, axis=ax, keepdims=keepdims), dtype=np.float32)
    else:
        r = masked_reduce(name, v, ax, keepdims, m)
        om = reduce_out_mask(m, ax, keepdims)  # outputs with no selected input: not written
    default = dt.bool_ if name == "all" else x.dtype if name != "mean" or dt.is_float(x.dtype) else dt.float32
    res = compute_result(
        r,
        _dtype(dtype, default, name),
        op="tensor_reduce",
        api=api or f"nl.{name}",
        engine=DVE,
        inputs=(x,),
        mask=om,
        func=name,
        axes=len(ax),
    )
    return emit(ctx, dst, res)


def _row_mask(mask, data, api, *, reduce_dim_ok):
    """Output mask of a per-partition reducing instruction: the partitions ``mask`` selects, as a
    (P, 1) array (None: all).  bn_stats/bn_aggr take no mask on the reduce dimension (known-issues
    doc: "the mask sent to bn_stats could not contain any indices from the reduction dimension")."""
    m = mask_of(mask, data.shape, api)
    if m is None or m is True or m is False:
        return m
    flat = m.reshape(m.shape[0], -1)
    if not reduce_dim_ok and not (flat == flat[:, :1]).all():
        # the known-issues page says bn_stats does not support it, but the SDK's own 2.26 layernorm example
        # (general/nki/examples/layernorm, nki_layernorm_kernel_v2) masks bn_stats on its free axis for a ragged last
        # chunk: the lenient rule ki.bn_stats_reduce_mask; the statistics are those of the masked-in elements
        lenient(
            "ki.bn_stats_reduce_mask",
            f"{api} with a mask on the reduce (free) dimension: the known-issues page says it is not supported (the "
            "interpreter computes the statistics of the masked-in elements)",
            "Mask partitions only, e.g. mask=(i_p < n), and give bn_stats only the valid free elements",
            op=api,
            arg="mask",
        )
    return flat.any(axis=1, keepdims=True)


def _in_mask(mask, data, api):
    """The read mask of a per-partition statistic: the instruction's mask over its input, without the
    partitions that were never written at all (None: read everything).  Decision (catalogue section 7,
    AWS's layernorm tutorial v2: a partition-masked load, then bn_stats/bn_aggr over every partition, then a
    partition-masked store): a never-written partition gives a never-written result partition, and the
    poison warning comes where that garbage is read across partitions or stored, not here."""
    m = mask_of(mask, data.shape, api)
    m = m if isinstance(m, np.ndarray) else None
    if data.alloc.unwritten and data.shape[0] > 1:
        pm = dt.poison_mask(data.read_raw())
        if pm is not None:
            dead = pm.reshape(pm.shape[0], -1).all(axis=1)
            if dead.any():
                live = np.broadcast_to(~dead.reshape((-1,) + (1,) * (data.ndim - 1)), data.shape)
                m = live if m is None else (np.broadcast_to(m, data.shape) & live)
    return m


def _out_rows(rows, read_mask, shape):
    """A (P, 1) partition mask as the result's mask (partitions not read are not written): None when every
    partition is selected (catalogue section 11 item 8: a free-axis mask that holds everywhere is no mask)."""
    if read_mask is not None:
        live = read_mask.reshape(read_mask.shape[0], -1).any(axis=1, keepdims=True)
        rows = live if rows is None or rows is True else (False if rows is False else rows & live)
    if rows is None or rows is True or rows is False:
        return rows
    if rows.all():
        return None
    return np.broadcast_to(rows, shape)


@op
def bn_stats(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.bn_stats",
    name: str | None = None,
) -> Tensor | None:
    """Per partition over <= 512 free elements: (count, mean, var*count) for even and odd elements."""
    aname = "bn_stats"
    tile(data, aname, "data")
    P, F = data.shape[0], free_size(data.shape)
    if F > limits.BN_STATS_FMAX:
        raise SimValueError(
            "E020",
            aname,
            "data",
            "bn_stats free size exceeds nl.tile_size.bn_stats_fmax",
            "Split the free axis into chunks of 512 and combine them with bn_aggr",
            got=F,
            limit=limits.BN_STATS_FMAX,
        )
    rows = _row_mask(mask, data, aname, reduce_dim_ok=False)
    # masked-out partitions are not read (their rows may never have been written: AWS's layernorm
    # tutorial v2 loads only the valid rows under the same partition mask)
    rm = _in_mask(mask, data, aname)
    x = data.read_f32(rm).reshape(P, F)
    sel = None if rm is None else np.broadcast_to(rm, data.shape).reshape(P, F)
    if sel is not None and (sel == sel[:, :1]).all():
        sel = None  # a partition mask: whole rows (the rows not selected are not written)
    cols = []
    # mean and variance as NumPy's two passes with every sum in the device's order (ops.device_sum); how the
    # device computes them (two passes, Welford, a rounded 1/n) is not published
    for k in (0, 1):
        part = x[:, k::2]
        n = part.shape[1]
        if sel is None:
            mean = device_mean(part, 1) if n else np.zeros(P, np.float32)
            var = device_var(part, 1) if n else np.zeros(P, np.float32)
            cols += [np.full(P, n, np.float32), mean, var * n]
            continue
        # a free-axis mask (ki.bn_stats_reduce_mask): the statistics of the masked-in elements of each partition
        s_ = sel[:, k::2]
        cnt = s_.sum(axis=1).astype(np.float32)
        safe = np.maximum(cnt, 1.0)
        mean = device_sum(np.where(s_, part, 0.0), 1) / safe
        var = device_sum(np.where(s_, (part - mean[:, None]) ** 2, 0.0), 1) / safe
        cols += [cnt, mean, var * cnt]
    v = np.stack(cols, axis=1).astype(np.float32)
    res = compute_result(
        v,
        _dtype(dtype, data.dtype, aname),
        op="bn_stats",
        api=api,
        engine=DVE,
        inputs=(data,),
        mask=_out_rows(rows, rm, v.shape),
        func="bn_stats",
        axes=1,
    )
    return emit(ctx, dst, res)


@op
def bn_aggr(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.bn_aggr",
    name: str | None = None,
) -> Tensor | None:
    """Combine bn_stats groups (P, 6*k) -> (P, 2) = (mean, variance)."""
    aname = "bn_aggr"
    tile(data, aname, "data")
    P = data.shape[0]
    rows = _row_mask(mask, data, aname, reduce_dim_ok=False)
    per_partition = data.size // P if P else 0
    if per_partition % 3 or not per_partition:
        # ISA bn_aggr (SDK 2.26 nki/isa docstring): (count, mean, variance*count) triples per partition
        raise SimValueError(
            "E011",
            aname,
            "data",
            "bn_aggr reads (count, mean, variance*count) triples: the "
            f"elements per partition of data must be a positive multiple of 3, got {per_partition}",
            "Pass whole bn_stats outputs (6 elements per partition each)",
            got=per_partition,
            limit="a multiple of 3",
        )
    rm = _in_mask(mask, data, aname)
    s = data.read_f32(rm).reshape(P, -1, 3)
    n, mean, m2 = s[:, :, 0], s[:, :, 1], s[:, :, 2]
    # the groups' sums in the device's order (ops.device_sum); the device's formula is not published
    tot = device_sum(n, 1)
    safe = np.where(tot == 0, 1, tot)
    mu = device_sum(n * mean, 1) / safe
    var = device_sum(m2 + n * (mean - mu[:, None]) ** 2, 1) / safe
    v = np.stack([mu, var], axis=1).astype(np.float32)
    res = compute_result(
        v,
        _dtype(dtype, data.dtype, aname),
        op="bn_aggr",
        api=api,
        engine=DVE,
        inputs=(data,),
        mask=_out_rows(rows, rm, v.shape),
        func="bn_aggr",
        axes=1,
    )
    return emit(ctx, dst, res)


@op
def max8(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    *,
    dtype: DTypeArg = None,
    mask: MaskArg = None,
    api: str = "nisa.max8",
    name: str | None = None,
) -> Tensor | None:
    """Top-8 values per partition, descending."""
    aname = "max8"
    tile(src, aname, "src")
    P = src.shape[0]
    n = int(np.prod(src.shape[1:], dtype=np.int64))
    # ISA max8 (SDK 2.26 isa docstring; same in the NKI 0.6 one): it reads between 8 and 16,384 elements
    # per partition, inclusive
    if n < 8:
        raise SimValueError("E011", aname, "src", "max8 needs at least 8 elements per partition", got=n, limit=8)
    if n > 16384:
        raise SimValueError(
            "E011",
            aname,
            "src",
            f"max8 reads at most 16,384 elements per partition; src {tuple(src.shape)} has {n}",
            "Run max8 on slices of at most 16,384 elements and merge the candidates "
            "(a second max8 over the concatenated top-8s)",
            got=n,
            limit=16384,
        )
    x = src.read_f32().reshape(P, -1)
    rows = _row_mask(mask, src, aname, reduce_dim_ok=True)
    m = mask_of(mask, src.shape, aname)
    if m is not None and m is not True and m is not False:
        x = np.where(m.reshape(P, -1), x, -np.inf)  # mask= selects the inputs
    r = -np.sort(-x, axis=1)[:, :8]
    res = compute_result(
        np.ascontiguousarray(r),
        _dtype(dtype, src.dtype, aname),
        op="max8",
        api=api,
        engine=DVE,
        inputs=(src,),
        mask=rows,
        func="max8",
        axes=1,
    )
    return emit(ctx, dst, res)


# add/average across partitions: left to right from partition 0, like the free axis (ops.device_sum) --
# an assumption: the device data measure a free-axis reduction only (GpSimdE's order is not published)
_PAR_REDUCE: dict[str, Callable[..., Any]] = {
    "add": device_sum,
    "maximum": np.max,
    "max": np.max,
    "average": device_mean,
    "mean": device_mean,
    "bitwise_or": np.bitwise_or.reduce,
    "bitwise_and": np.bitwise_and.reduce,
}


@op
def tensor_partition_reduce(
    ctx: RunContext,
    dst: Dst,
    op: OpArg,
    data: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.tensor_partition_reduce",
    name: str | None = None,
) -> Tensor | None:
    """Reduce across partitions on GpSimdE: (P, ...) -> (1, ...) with add, max, average, bitwise_or or
    bitwise_and (SDK 2.26 isa; NKI 0.6 isa adds average)."""
    aname = "tensor_partition_reduce"
    tile(data, aname, "data")
    name_ = opcode(op, aname)
    if name_ not in _PAR_REDUCE:
        raise NKISyntaxError(
            "E021",
            aname,
            "op",
            f"{name_} is not supported in 'tensor_partition_reduce'",
            "Use np.add, np.max, nl.average, np.bitwise_or or np.bitwise_and",
        )
    if name_.startswith("bitwise"):
        if not dt.is_int(data.dtype):
            raise SimTypeError("E009", aname, "data", "bitwise reductions need an integer tile")
        r = _PAR_REDUCE[name_](np.asarray(data.read()).astype(np.int64), axis=0)[None]
    else:
        r = np.asarray(_PAR_REDUCE[name_](data.read_f32(), axis=0), np.float32)[None]
    res = compute_result(
        np.ascontiguousarray(r),
        _dtype(dtype, data.dtype, aname),
        op="tensor_partition_reduce",
        api=api,
        engine=POOL,
        inputs=(data,),
        mask=mask_of(mask, r.shape, aname),
        func=name_,
        axes=0,
    )
    return emit(ctx, dst, res)


# ---- compositions of instructions ---------------------------------------------------------------


@op
def softmax(
    ctx: RunContext, dst: Dst, x: Tensor, axis: AxisArg, *, dtype: DTypeArg = None, mask: MaskArg = None
) -> Tensor | None:
    """``nl.softmax``: exp(x - max) / sum(exp(x - max)) as its four instructions; ``mask=`` restricts
    every step (masked-out outputs are not written)."""
    m = reduce(ctx, None, "max", x, axis, keepdims=True, mask=mask)
    e = unary(ctx, None, "exp", binary(ctx, None, "subtract", x, m, mask=mask), mask=mask)
    return binary(
        ctx, dst, "divide", e, reduce(ctx, None, "sum", e, axis, keepdims=True, mask=mask), dtype=dtype, mask=mask
    )


@op
def rms_norm(
    ctx: RunContext,
    dst: Dst,
    x: Tensor,
    w: Tensor,
    axis: AxisArg,
    n: int,
    epsilon: float = 1e-06,
    *,
    dtype: DTypeArg = None,
    mask: MaskArg = None,
) -> Tensor | None:
    """``nl.rms_norm``: x * rsqrt(sum(x^2, axis) / n + epsilon) * w; ``mask=`` restricts every step (the
    per-row steps run on the rows the mask selects)."""
    m = mask_of(mask, x.shape, "rms_norm")
    rows = None
    if m is not None and m is not True and m is not False:
        rows = reduce_out_mask(m, _axes(x, axis, "rms_norm"), True)
    elif m is False:
        rows = False
    ms = binary(
        ctx,
        None,
        "divide",
        reduce(ctx, None, "sum", unary(ctx, None, "square", x, mask=mask), axis, keepdims=True, mask=mask),
        float(n),
        mask=rows,
    )
    r = unary(ctx, None, "rsqrt", binary(ctx, None, "add", ms, float(epsilon), mask=rows), mask=rows)
    return binary(ctx, dst, "multiply", binary(ctx, None, "multiply", x, r, mask=mask), w, dtype=dtype, mask=mask)
