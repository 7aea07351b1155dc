"""The ISA enums, defined once for both front ends (``nisa.engine``, ``nisa.oob_mode``, ...).

Members: the NKI 0.6 ``nki.isa`` reference (aws-neuron-sdk 81ce03ae ``nki/api/nki/isa/__init__.py``),
a superset of SDK 2.26's (49ee15c5 ``general/nki/api/nki/isa/__init__.py``: no ``engine.dma``, no
``nc_version.gen4``, no ``dma_engine``); ``reduce_cmd.load_reduce`` from the 2.27 docstrings
(337e6041).  Enum arguments are normalised by :func:`enum_arg`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .errors import NKISyntaxError
from .trace import ACT, DVE, PE, POOL, Engine

if TYPE_CHECKING:
    _E = TypeVar("_E", bound=enum.Enum)


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4  # 2.27 docstrings (337e6041): load imm1 into the accumulators, then reduce


class matmul_perf_mode(str, enum.Enum):
    none = "none"
    double_row = "double_row"


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


class constants:
    """``nki.isa.constants``: the enums again (``from nki.isa import constants``)."""

    engine, reduce_cmd, dge_mode, oob_mode = engine, reduce_cmd, dge_mode, oob_mode
    matmul_perf_mode, nc_version, dma_engine = matmul_perf_mode, nc_version, dma_engine


# the trace engine of an ISA engine enum member (sync and dma issue no compute instruction)
TRACE_ENGINE: dict = {engine.tensor: PE, engine.scalar: ACT, engine.gpsimd: POOL, engine.vector: DVE}
ENGINE_OF_TRACE: dict = {PE: engine.tensor, ACT: engine.scalar, POOL: engine.gpsimd, DVE: engine.vector}


def enum_arg(x: Any, cls: type[_E], api: str, arg: str) -> _E | None:
    """An enum argument: a member of ``cls``, or an int naming one (NKI 0.6 MIG says raw integers are
    rejected, but nki-library, run on hardware, passes ``dge_mode=3``); anything else is E021.
    ``None`` stays ``None``."""
    if x is None or x.__class__ is cls:
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        try:
            return cls(int(x))
        except ValueError:
            pass
    raise NKISyntaxError(
        "E021",
        api,
        arg,
        f"expected a nki.isa.{cls.__name__} member, got {x!r}",
        f"Use nisa.{cls.__name__}.<name> ({', '.join(m.name for m in cls)})",
    )


def engine_of(e: Any, default: Engine, api: str) -> Engine:
    """The trace engine for an ``engine=`` argument (unset / ``engine.unknown``: ``default``)."""
    if e is None:
        return default
    e = enum_arg(e, engine, api, "engine")
    if e is engine.unknown:
        return default
    return TRACE_ENGINE.get(e, default)


def names_engine(kw: dict) -> bool:
    """Do a call's keyword arguments pin its engine (``engine=`` other than unset / ``engine.unknown``)?  The
    event records it (``Event.engine_given``): the compiler places only the instructions a kernel does not pin."""
    e = kw.get("engine")
    return e is not None and e is not engine.unknown and getattr(e, "name", e) not in ("unknown", 0)


def get_nc_version() -> nc_version:
    """The interpreter models trn2 (NeuronCore-v3)."""
    return nc_version.gen3
