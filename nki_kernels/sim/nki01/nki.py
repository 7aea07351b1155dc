"""The top-level ``neuronxcc.nki`` namespace of the interpreter (NKI 0.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ..core.errors import not_implemented
from . import compiler, isa, language, typing  # noqa: F401
from .kernel import (  # noqa: F401
    DeviceKernel,
    Kernel,
    baremetal,
    benchmark,
    device_handlers,
    jit,
    profile,
    simulate_kernel,
    skip_middle_end_transformations,
    trace,
    trace_kernel,
)
from .tile import Tile

if _TYPE_CHECKING:
    from typing import NoReturn

tensor = Tile  # nki.tensor (2.26 nki docs: the tensor class)


def __getattr__(name: str) -> NoReturn:
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.{name}")
