"""Scalar loads and stores (NKI 0.7 ``nisa.scalar_load`` / ``nisa.scalar_store``): one integer between a
1x1 tensor and an engine register.

Sources: the SDK 2.33 API pages ``nki/api/generated/nki.isa.scalar_load.html`` and
``nki.isa.scalar_store.html`` (docs/nki-0.7-spec.md I21, I22): the tensor is 1x1, in SBUF or HBM, of dtype
int32 or int64 (unsigned dtypes are not accepted); a store writes the scalar at its own width.

Decision (docs/nki-0.7-spec.md "Decisions"): register transfers run on the engine sequencers, which the
trace does not model -- like ``register_load`` / ``register_store``, these record no trace event; the
store's write is a normal write of the tensor (written state, immutable inputs: E012).
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .context import RunContext
from .errors import SimTypeError, SimValueError
from .tensor import HBM_KINDS, SBUF, Tensor

WIDTHS = {np.dtype(np.int32): 32, np.dtype(np.int64): 64}
_UNSIGNED = {np.dtype(np.uint32): "int32", np.dtype(np.uint64): "int64"}


def wrap(value: int, bits: int) -> int:
    """``value`` as a two's-complement integer of ``bits`` bits (a 32-bit scalar wraps, never widens)."""
    m = 1 << bits
    v = int(value) & (m - 1)
    return v - m if v >= m >> 1 else v


def _scalar_tile(t: object, api: str, arg: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise SimTypeError(
            "E010", api, arg, f"{arg} must be a 1x1 tensor, got {type(t).__name__}", "Pass a (1, 1) SBUF or HBM tensor"
        )
    b = t.alloc.buffer
    if b is not SBUF and b not in HBM_KINDS:
        raise SimTypeError(
            "E007",
            api,
            arg,
            f"{arg} must be in SBUF or HBM, got a tensor in {b.value}",
            "Copy the value to an SBUF tile first (nisa.tensor_copy)",
        )
    if t.size != 1 or len(t.shape) > 2:
        raise SimValueError(
            "E011",
            api,
            arg,
            f"{arg} must be a 1x1 tensor, got shape {tuple(t.shape)}",
            "Slice one element: t[0:1, 0:1]",
        )
    d = t.dtype
    if d not in WIDTHS:
        signed = _UNSIGNED.get(d)
        fix = f"Use nl.{signed}, the signed dtype of the same width" if signed else "Use an nl.int32 tensor"
        raise SimTypeError("E009", api, arg, f"{arg} must be nl.int32 or nl.int64, got {dt.name_of(d)}", fix)
    return t


def scalar_load(ctx: RunContext, src: Tensor, *, api: str = "nisa.scalar_load") -> tuple[int, np.dtype]:
    """The integer held by the 1x1 tensor ``src`` and its dtype (the scalar's width)."""
    t = _scalar_tile(src, api, "src")
    value = int(np.asarray(t.read()).reshape(-1)[0])
    return value, t.dtype


def scalar_store(ctx: RunContext, dst: Tensor, value: int, width: np.dtype, *, api: str = "nisa.scalar_store") -> None:
    """Write the scalar ``value`` of dtype ``width`` into the 1x1 tensor ``dst`` of the same width."""
    t = _scalar_tile(dst, api, "dst")
    if t.dtype != width:
        raise SimTypeError(
            "E009",
            api,
            "dst",
            f"a {dt.name_of(width) if width in WIDTHS else width} scalar cannot be stored into an "
            f"{dt.name_of(t.dtype)} tile: dst must have the scalar's width",
            "Store at the scalar's own width and convert in memory if needed",
        )
    t.write(np.full(t.shape, wrap(value, WIDTHS[width]), dtype=t.dtype), api=api)
