"""SPMD / LNC instance ids: ``nl.program_id``, ``nl.num_programs``, ``nl.program_ndim`` (NKI 0.1 spec §2;
NKI 0.6 K4: the logical-core index of an LNC launch)."""

from __future__ import annotations

import numpy as np

from .context import current
from .errors import SimIndexError


def program_id(axis: int = 0) -> int:
    ctx = current("program_id")
    if not isinstance(axis, (int, np.integer)) or axis < 0 or axis >= len(ctx.grid):
        raise SimIndexError(
            "E017",
            "program_id",
            "axis",
            "axis in `program_id` is out-of-bound(s) of the spmd launch grid",
            f"The grid is {ctx.grid or '()'}; launch with kernel[g0, g1](...)",
            got=axis,
            limit=len(ctx.grid),
        )
    return ctx.program_id[axis]


def num_programs(axes: int | tuple[int, ...] | list[int] | None = None) -> int | tuple[int, ...]:
    ctx = current("num_programs")
    if axes is None:
        return int(np.prod(ctx.grid)) if ctx.grid else 1
    if isinstance(axes, (tuple, list)):
        return tuple(ctx.grid[a] for a in axes)
    if axes >= len(ctx.grid):
        raise SimIndexError(
            "E017", "num_programs", "axes", "axis out of the spmd launch grid", got=axes, limit=len(ctx.grid)
        )
    return ctx.grid[axes]


def program_ndim() -> int:
    return len(current("program_ndim").grid)
