"""``neuronxcc.nki.isa`` (nisa, NKI 0.1, SDK 2.26): one line per instruction over the op core.

``grep -n "^NAME = " nki_kernels/sim/nki01/isa.py`` finds an instruction's adapter; the core op
it names (``core.NAME``) holds the semantics and their sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

import numpy as np

from ..core import dma as _dma
from ..core import indirect as _indirect
from ..core import reduce as _reduce
from ..core import rng as _rng
from ..core import select as _select
from ..core import tensore as _tensore
from ..core import vector as _vector
from ..core.context import maybe_current as _maybe_current
from ..core.enums import (  # noqa: F401
    constants,
    dge_mode,
    dma_engine,
    engine,
    get_nc_version,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from ..core.errors import SimTypeError, not_implemented
from . import allocation as _alloc
from .adapt import returns_fresh, with_dst
from .indexing import IndexExpr, MaskExpr, mask_value
from .symbolic import Index, Predicate, concrete

if _TYPE_CHECKING:
    from typing import NoReturn

tensor_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.scalar, engine.gpsimd
vector_engine, sync_engine, unknown_engine = engine.vector, engine.sync, engine.unknown


class fp32:
    """``nisa.fp32`` (2.26 isa docs): FP32 limits, e.g. ``fp32.min``, range_select's default fill."""

    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


# ---- argument conversions where the 0.1 signature differs from the core op's ------------------


def _dma_copy_args(*args, dst=None, src=None, **kw):
    """Keyword-only in SDK 2.26; the 2.21 positional form ``dma_copy(src, dst)`` is accepted."""
    if args:
        if len(args) == 2 and dst is None and src is None:
            src, dst = args
        else:
            raise SimTypeError(
                "E010",
                "dma_copy",
                None,
                "dma_copy takes dst= and src= keywords",
                "Write nisa.dma_copy(dst=..., src=...)",
            )
    return dst, (), dict(kw, src=src)


def _iota_args(expr, dtype, **kw):
    """``iota(expr, dtype)``: an int or an nl.arange/mgrid expression -> its integer values."""
    if isinstance(expr, (int, np.integer)) or expr.__class__ is Index:
        v = np.full((1, 1), int(expr), dtype=np.int64)
    elif isinstance(expr, IndexExpr):
        v = expr.full()
        v = v if v.ndim >= 2 else v.reshape(-1, 1)
    else:
        raise SimTypeError("E010", "iota", "expr", "iota expects an nl.arange/mgrid expression")
    return (v, dtype), kw


def _memset_args(shape, value, dtype, **kw):
    return (value, dtype), dict(kw, shape=shape)


def _affine_select_args(pred, on_true_tile, on_false_value, **kw):
    if isinstance(pred, (MaskExpr, Predicate)):
        pred = mask_value(pred, "affine_select")  # E015 for a non-affine predicate
    return (pred, on_true_tile, on_false_value), kw


def _matmul_args(*args, tile_position=(), **kw):
    """``tile_position`` may hold loop indices (SDK 2.26 isa nc_matmul: "integer or affine expression").  Not
    only affine ones: the SDK's own golden test passes ``((i % 2) * 64, (j % 2) * 64)``
    (aws-neuron-sdk@49ee15c5 general/nki/test/test_nki_isa_nc_matmul.py), so the runnable source wins."""
    if tile_position:
        kw["tile_position"] = tuple(concrete(v) for v in tuple(tile_position))
    return args, kw


def _shuffle_args(src, dst, shuffle_mask, **kw):
    return dst, (src, shuffle_mask), kw


# ---- DMA -------------------------------------------------------------------------------------
dma_copy = with_dst(_dma.dma_copy, convert=_dma_copy_args)
dma_transpose = returns_fresh(_dma.dma_transpose)

# ---- TensorE --------------------------------------------------------------------------------
nc_matmul = returns_fresh(_tensore.nc_matmul, convert=_matmul_args)
nc_transpose = returns_fresh(_tensore.nc_transpose, engine_param=True)

# ---- VectorE / ScalarE / GpSimdE -----------------------------------------------------------
tensor_copy = returns_fresh(_vector.tensor_copy, engine_param=True)
tensor_tensor = returns_fresh(_vector.tensor_tensor, engine_param=True)
tensor_scalar = returns_fresh(_vector.tensor_scalar, engine_param=True)
scalar_tensor_tensor = returns_fresh(_vector.scalar_tensor_tensor)
activation = returns_fresh(_vector.activation)
activation_reduce = returns_fresh(_vector.activation_reduce)
tensor_scalar_reduce = returns_fresh(_vector.tensor_scalar_reduce)
tensor_tensor_scan = returns_fresh(_vector.tensor_tensor_scan)
reciprocal = returns_fresh(_vector.reciprocal)
iota = returns_fresh(_vector.iota, convert=_iota_args)
memset = returns_fresh(_vector.memset, engine_param=True, convert=_memset_args)
affine_select = returns_fresh(_vector.affine_select, convert=_affine_select_args)
tensor_reduce = returns_fresh(_reduce.tensor_reduce)
tensor_partition_reduce = returns_fresh(_reduce.tensor_partition_reduce)
bn_stats = returns_fresh(_reduce.bn_stats)
bn_aggr = returns_fresh(_reduce.bn_aggr)
max8 = returns_fresh(_reduce.max8)
local_gather = returns_fresh(_indirect.local_gather)
tensor_copy_dynamic_src = returns_fresh(_indirect.tensor_copy_dynamic_src, engine_param=True)
tensor_copy_dynamic_dst = with_dst(_indirect.tensor_copy_dynamic_dst, engine_param=True)
dropout = returns_fresh(_rng.dropout)
tensor_copy_predicated = with_dst(_select.tensor_copy_predicated)
select_reduce = with_dst(_select.select_reduce)
range_select = returns_fresh(_select.range_select)
nc_find_index8 = returns_fresh(_select.nc_find_index8)
nc_match_replace8 = returns_fresh(_select.nc_match_replace8)
tensor_scalar_cumulative = with_dst(_select.tensor_scalar_cumulative)
sequence_bounds = returns_fresh(_select.sequence_bounds)
nc_stream_shuffle = with_dst(_select.nc_stream_shuffle, convert=_shuffle_args)


# ---- direct-allocation rules of single instructions (nki01/allocation.py) ----------------------------
def _guarded(fn, check):
    """``fn`` preceded by ``check(args, kw)`` when the running kernel allocates directly."""

    def call(*args, **kw):
        ctx = _maybe_current()
        if ctx is not None:
            d = ctx.direct
            if d is not None and d.active:
                check(args, kw)
        return fn(*args, **kw)

    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    call.core_op = fn.core_op
    return call


def _bias_arg(args, kw):
    _alloc.check_bias("activation", kw.get("bias", args[2] if len(args) > 2 else None))


def _transpose_engine(args, kw):
    e = kw.get("engine")
    if e is None or getattr(e, "name", e) in ("tensor", "unknown"):
        _alloc.check_tensor_engine_transpose(
            "nc_transpose",
            "nisa.nc_transpose on TensorE (engine=" + ("unset" if e is None else str(getattr(e, "name", e))) + ")",
        )


activation = _guarded(activation, _bias_arg)
activation_reduce = _guarded(activation_reduce, _bias_arg)
nc_transpose = _guarded(nc_transpose, _transpose_engine)

# the registered instructions (api name -> call)
INSTRUCTIONS = {n: f for n, f in dict(globals()).items() if callable(f) and hasattr(f, "core_op")}


def __getattr__(name: str) -> NoReturn:
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.isa.{name}")
