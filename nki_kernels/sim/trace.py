"""Compatibility path of the typed instruction trace: the records live in ``nki_kernels.sim.core.trace``."""

from __future__ import annotations

from .core.trace import (  # noqa: F401
    ACT,
    DMA,
    DVE,
    ENGINES,
    PAYLOADS,
    PE,
    POOL,
    Buffer,
    Dma,
    Elementwise,
    Engine,
    Event,
    LoopFrame,
    LoopKind,
    Matmul,
    Payload,
    Reduce,
    Region,
    Trace,
    Transpose,
)
