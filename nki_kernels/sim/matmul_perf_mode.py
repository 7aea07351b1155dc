"""``nisa.nc_matmul(..., perf_mode=...)``: TensorE FP8 double-row mode.

Sources (aws-neuron-sdk): the 2.27 docstring at 337e6041 ``nki/api/nki/isa/__init__.py``
(``nc_matmul`` "Performance mode": FP8 double performance mode on NeuronCore-v3+, packing two
FP8 element pairs per PE, not combinable with column tiling; ``matmul_perf_mode``); the golden
value in ``nki/test/test_nki_isa_nc_matmul.py::test_double_row_gen3`` (81ce03ae): stationary
(K, 2, M) and moving (K, 2, N) fp8 tiles give ``einsum("kli,klj->ij")``, i.e. the axis of 2 is a
second contraction axis.  2.26 documents no ``perf_mode``; the example spells it
``"double_row_gen3"``.
"""
from __future__ import annotations

import enum

import numpy as np

from . import dtypes as _dt
from . import limits as _limits
from .context import current as _current
from .errors import SimTypeError, SimValueError
from .tensor import fresh, mask_array
from .trace import PE


class matmul_perf_mode(enum.Enum):
    """2.27 ``nisa.matmul_perf_mode``."""
    none = "none"
    double_row = "double_row"


_DOUBLE_ROW = ("double_row", "double_row_gen3")
_FP8 = (_dt.float8_e4m3, _dt.float8_e5m2)


def mode_name(perf_mode) -> str:
    """'none' or a double-row spelling; anything else is an error."""
    name = "none" if perf_mode is None else getattr(perf_mode, "value", perf_mode)
    if name != "none" and name not in _DOUBLE_ROW:
        raise SimValueError("E003", "nc_matmul", "perf_mode", f"unknown perf_mode {perf_mode!r}",
                            "Use nisa.matmul_perf_mode.none or .double_row ('double_row_gen3' on trn2)")
    return name


def double_row_matmul(stationary, moving, name, *, tile_position=(), tile_size=(), mask=None, api="nisa.nc_matmul"):
    """stationary (K, 2, M), moving (K, 2, N), both fp8 -> PSUM fp32 (M, N) = sum over K and the pair axis."""
    ctx = _current("nc_matmul")
    for arg, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype not in _FP8:
            raise SimTypeError("E009", "nc_matmul", arg, f"perf_mode={name!r} needs fp8 operands, got "
                               f"{_dt.name_of(t.dtype)}", "Use nl.float8_e4m3 / nl.float8_e5m2 or perf_mode none")
        if t.ndim != 3 or t.shape[1] != 2:
            raise SimValueError("E003", "nc_matmul", arg, f"perf_mode={name!r} needs a (K, 2, F) operand, got "
                                f"{t.shape}", "Pack the two element pairs on axis 1")
    K, M, N = stationary.shape[0], stationary.shape[2], moving.shape[2]
    if moving.shape[0] != K:
        raise SimValueError("E003", "nc_matmul", "moving", f"contraction sizes differ: {stationary.shape} vs "
                            f"{moving.shape}", got=moving.shape[0], limit=K)
    if M > _limits.GEMM_STATIONARY_FMAX or N > _limits.GEMM_MOVING_FMAX:
        raise SimValueError("E003", "nc_matmul", "moving" if N > _limits.GEMM_MOVING_FMAX else "stationary",
                            f"free sizes M={M}, N={N} exceed {_limits.GEMM_STATIONARY_FMAX} / {_limits.GEMM_MOVING_FMAX}")
    if tile_size and int(tuple(tile_size)[1]) != 128:
        raise SimValueError("E003", "nc_matmul", "tile_size", "double-row mode cannot be combined with column "
                            "tiling (2.27 nc_matmul)", f"got tile_size={tile_size}")
    r = np.einsum("kli,klj->ij", stationary.read_f32(), moving.read_f32(), dtype=np.float32)
    out = fresh(np.ascontiguousarray(r, dtype=np.float32), _dt.float32, "psum", api="nc_matmul",
                mask=mask_array(mask, (M, N), "nc_matmul"))
    if ctx.options.trace:
        out._event = ctx.record("nc_matmul", api, PE, partitions=K, free_elems=2 * N,
                                in_shapes=[stationary.shape, moving.shape], out_shape=(M, N),
                                in_dtypes=[_dt.name_of(stationary.dtype), _dt.name_of(moving.dtype)],
                                out_dtype="float32",
                                nbytes=stationary.size * stationary.itemsize + moving.size * moving.itemsize + M * N * 4,
                                flops=2 * K * 2 * M * N, reads=[stationary.region(), moving.region()],
                                writes=[out.region()],
                                meta={"K": K, "M": M, "N": N, "psum_out": True, "perf_mode": name})
    return out
