"""Instruction trace: one record per ISA-level instruction the interpreter executes.

The trace is the input of the cost model (``nki_kernels.perf``).  Every NKI call that
lowers to a hardware instruction (a DMA, a TensorE matmul/transpose, a VectorE/ScalarE/
GpSimdE op, an on-chip copy made by an assignment) appends exactly one :class:`Event`.

Buffers are identified by allocation id; ``reads``/``writes`` hold byte intervals
``(alloc_id, lo, hi)`` (half-open) so that a scheduler can find true dependencies between
tiles that share one big buffer.  For SBUF/PSUM the interval is in bytes *within one
partition* (every partition holds the same free-axis layout), so disjoint column/block
slices of one tile do not overlap; for HBM it is relative to the tensor's first byte.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# Engine names, as the neuron-profile timeline calls its queues.
PE = "PE"        # TensorE (matmul, transpose)
ACT = "ACT"      # ScalarE (activation, its HW-DGE queue)
DVE = "DVE"      # VectorE
POOL = "POOL"    # GpSimdE
DMA = "DMA"      # DMA engines (dma_copy, load, store)
ENGINES = (PE, ACT, DVE, POOL, DMA)


@dataclass(slots=True)
class Region:
    """A byte interval ``[lo, hi)`` of one allocation (per partition for SBUF/PSUM)."""
    alloc_id: int
    buffer: str          # "hbm" | "shared_hbm" | "private_hbm" | "sbuf" | "psum"
    lo: int
    hi: int

    def overlaps(self, other: "Region") -> bool:
        return self.alloc_id == other.alloc_id and self.lo < other.hi and other.lo < self.hi


@dataclass(slots=True)
class Event:
    """One executed instruction.

    seq        position in program order (0-based, per simulate_kernel run)
    op         ISA-level name: "dma_copy", "nc_matmul", "nc_transpose", "tensor_tensor",
               "tensor_scalar", "tensor_copy", "activation", "tensor_reduce", "iota", ...
    api        the NKI call that produced it ("nl.load", "nisa.nc_matmul", "dst[...] = v", ...)
    engine     one of ENGINES
    partitions number of partitions the instruction spans (P); for DMA, of the SBUF side
               (or of the destination's leading axis for HBM->HBM)
    free_elems elements per partition processed (N in trn2-hardware.md §4.2); for
               nc_matmul the moving free size; for DMA the total elements / partitions
    in_shapes, out_shape, in_dtypes, out_dtype: as the instruction saw them
    bytes      bytes moved (DMA: bytes transferred; compute: bytes read + written)
    flops      arithmetic operations (matmul: 2*K*M*N; elementwise: P*N per op)
    reads, writes  Regions read / written (PSUM accumulation reads and writes its target)
    accumulate True when a matmul accumulated into PSUM (psum += nc_matmul)
    meta       op-specific extras, e.g. {"K":128,"M":128,"N":512}, {"src":"hbm","dst":"sbuf",
               "contiguous_bytes":2048, "descriptors":128}, {"func":"exp"}, {"strided":True}
    file, line kernel source location (first frame outside nki_kernels.sim)
    program_id SPMD instance index tuple (() without a grid)
    loops      enclosing loop stack: tuple of (kind, index) with kind in
               {"affine","sequential","static"}, outermost first
    """
    seq: int
    op: str
    api: str
    engine: str
    partitions: int
    free_elems: int
    in_shapes: tuple
    out_shape: tuple
    in_dtypes: tuple
    out_dtype: str
    bytes: int
    flops: int
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    accumulate: bool = False
    meta: dict = field(default_factory=dict)
    file: str = ""
    line: int = 0
    program_id: tuple = ()
    loops: tuple = ()

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Trace:
    """All events of one run, in program order, plus run-level facts."""
    events: list = field(default_factory=list)
    kernel_name: str = ""
    grid: tuple = ()
    peak_sbuf_bytes_per_partition: int = 0
    peak_psum_bytes_per_partition: int = 0
    # (file, line) of every explicit allocation (nl.ndarray/zeros/..., loads); instruction
    # results are absent (their producing event is their allocation point)
    alloc_origins: dict = field(default_factory=dict)
    # alloc_id -> the explicit ``name=`` given at allocation (nl.ndarray(..., name="acc")), only
    # when one was given; the cost model keys buffer identity on it before source lines
    alloc_names: dict = field(default_factory=dict)
    note: Optional[str] = None

    def __len__(self) -> int:
        return len(self.events)

    def by_engine(self) -> dict:
        out: dict = {e: [] for e in ENGINES}
        for ev in self.events:
            out.setdefault(ev.engine, []).append(ev)
        return out
