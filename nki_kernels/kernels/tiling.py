"""Tiling arithmetic shared by the kernels' plans: ceil-div, item sizes, on-chip capacities,
and a ``kernel_assert``-style trace-time check.

Every capacity comes from ``nl.tile_size`` of the active backend (the real ``neuronxcc.nki``
on a device, the interpreter elsewhere), so a plan budgets against the numbers the compiler
uses, not a private copy:

  SBUF_BYTES       ``nl.tile_size.total_available_sbuf_size`` bytes per partition (trn2:
                   212,984 of the 224 KiB physical; KLR ``tile_size``)
  PSUM_BANK_BYTES  ``nl.tile_size.psum_fmax`` fp32 elements per partition = one PSUM bank
                   (2 KiB); a matmul result tile must fit one bank (arch guide, trn2-hardware §1.3)
  PSUM_BANKS       8 banks per partition (16 KiB): trn2 architecture guide; ``tile_size`` has no
                   field for it in SDK 2.26
  PMAX, STATIONARY_FMAX, MOVING_FMAX   ``pmax`` (128), ``gemm_stationary_fmax`` (128),
                   ``gemm_moving_fmax`` (512)

Pure Python: no instruction is issued here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nki_kernels.backend import nl

PMAX = int(nl.tile_size.pmax)
STATIONARY_FMAX = int(nl.tile_size.gemm_stationary_fmax)
MOVING_FMAX = int(nl.tile_size.gemm_moving_fmax)
PSUM_FMAX = int(nl.tile_size.psum_fmax)
PSUM_BANK_BYTES = PSUM_FMAX * 4
PSUM_BANKS = 8
PSUM_BYTES = PSUM_BANKS * PSUM_BANK_BYTES
SBUF_BYTES = int(nl.tile_size.total_available_sbuf_size)

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for non-negative ints."""
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b


def itemsize(dtype_name: str) -> int:
    """Bytes per element of one of the kernels' float dtypes (by name, see registry.dtype_name)."""
    return ITEMSIZE[dtype_name]


def split(total: int, size: int) -> tuple:
    """(number of full tiles of ``size``, size of the partial last tile or 0)."""
    return total // size, total % size


def tile_sizes(total: int, size: int) -> tuple:
    """Static sizes of the tiles covering ``total``: full tiles, then the remainder."""
    full, rem = divmod(total, size)
    return (size,) * full + ((rem,) if rem else ())


def spans(total: int, size: int) -> tuple:
    """((start, length), ...) covering ``total`` in pieces of ``size`` (the last may be short)."""
    return tuple((s, min(size, total - s)) for s in range(0, total, size))


def kernel_assert(cond: object, kernel: str, what: str) -> None:
    """Trace-time invariant of a kernel's own plan (not user input): a ValueError naming the
    kernel and the broken invariant, raised before the offending instruction.  Unlike a bare
    ``assert`` it survives ``python -O``."""
    if not cond:
        raise ValueError(f"{kernel}: internal tiling invariant violated: {what}")


def is_float32(dtype: Any) -> bool:
    try:
        return np.dtype(dtype) == np.dtype(np.float32)
    except TypeError:
        return False
