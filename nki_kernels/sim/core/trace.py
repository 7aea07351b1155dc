"""The typed instruction trace: one immutable :class:`Event` per ISA-level instruction executed.

The trace is the input of the cost model (``nki_kernels.perf``), which reads only the fields
defined here and dispatches on the class of ``Event.payload``.  Every NKI call that lowers to a
hardware instruction (a DMA, a TensorE matmul/transpose, a VectorE/ScalarE/GpSimdE op, an on-chip
copy made by an assignment) appends exactly one event, and nothing changes an event once it is in
the trace.

Buffers are identified by allocation id; ``reads``/``writes`` hold byte intervals
(:class:`Region`, half-open) so that a scheduler can find true dependencies between tiles that share
one big buffer.  For SBUF/PSUM the interval is in bytes *within one partition* (every partition
holds the same free-axis layout), so disjoint column/block slices of one tile do not overlap; for
HBM it is relative to the tensor's first byte.

All records are ``typing.NamedTuple`` classes (construction is a single C-level tuple build, about
0.3 µs, against about 2 µs for a frozen slotted dataclass on this machine) with equality and
hashing that include the class, so ``Transpose(...)`` never equals a ``Matmul`` with the same
fields.
"""

from __future__ import annotations

import enum
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple


class StrValued(str, enum.Enum):
    """An enum whose members are their string values to the rest of the program: equal to, hashing like and
    printing as the value ({"PE": x}[Engine.PE] works; f"{Engine.PE}" is "PE")."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Engine(StrValued):
    """The engine (queue) an instruction runs on; the values are neuron-profile's queue names."""

    PE = "PE"  # TensorE (matmul, transpose)
    ACT = "ACT"  # ScalarE (activation)
    DVE = "DVE"  # VectorE
    POOL = "POOL"  # GpSimdE
    DMA = "DMA"  # DMA engines (dma_copy, load, store)


class Buffer(StrValued):
    """The memory an allocation lives in."""

    HBM = "hbm"
    SHARED_HBM = "shared_hbm"
    PRIVATE_HBM = "private_hbm"
    SBUF = "sbuf"
    PSUM = "psum"

    @property
    def is_hbm(self) -> bool:
        return self in _HBM

    @property
    def on_chip(self) -> bool:
        return self is Buffer.SBUF or self is Buffer.PSUM


_HBM = frozenset((Buffer.HBM, Buffer.SHARED_HBM, Buffer.PRIVATE_HBM))


class LoopKind(StrValued):
    """The kind of an enclosing loop.  ``RANGE``: a plain Python ``range`` the front end treats as a
    loop (NKI 0.1: a top-level ``range`` behaves as ``sequential_range``; NKI 0.7: unrolled)."""

    AFFINE = "affine"
    SEQUENTIAL = "sequential"
    STATIC = "static"
    RANGE = "range"


PE, ACT, DVE, POOL, DMA = Engine.PE, Engine.ACT, Engine.DVE, Engine.POOL, Engine.DMA
ENGINES = tuple(Engine)


def _eq(self: tuple, other: object) -> bool:
    return self.__class__ is other.__class__ and tuple.__eq__(self, other)


def _ne(self: tuple, other: object) -> bool:
    return not (self.__class__ is other.__class__ and tuple.__eq__(self, other))


def _hash(self: tuple) -> int:
    return hash(self.__class__.__name__) ^ tuple.__hash__(self)


class Region(NamedTuple):
    """A byte interval ``[lo, hi)`` of one allocation (per partition for SBUF/PSUM)."""

    alloc_id: int
    buffer: Buffer
    lo: int
    hi: int

    def overlaps(self, other: Region) -> bool:
        return self.alloc_id == other.alloc_id and self.lo < other.hi and other.lo < self.hi


class LoopFrame(NamedTuple):
    """One enclosing loop of an instruction.

    ``loop_id`` is unique per *entry* into a loop within one run (a fresh id each time the loop
    statement starts); ``iteration`` is the 0-based position of the current index in the loop's
    range (not in a shuffled execution order); ``(file, line)`` is the loop statement, shared by
    all entries."""

    kind: LoopKind
    loop_id: int
    iteration: int
    trip_count: int
    file: str
    line: int


# ---- payloads: one class per instruction class -------------------------------------------------


class Matmul(NamedTuple):
    """A TensorE matmul instruction as the PE array sees it: ``K`` contraction rows (stationary
    partitions; 2x the partitions in FP8 double-row mode, where each PE holds two rows --
    aws-neuron-sdk 81ce03ae ``nki/guides/architecture/trainium2_arch.rst``: "MxKxN matmul, M=128,
    K=256, N=512", a 128-partition ``[128, 2, M]`` stationary tile), ``M`` stationary free size
    (output partitions), ``N`` moving free size (columns streamed).  ``in_dtype``: the input dtype
    that sets the TensorE rate (the wider of the two operands; the stationary one on ties);
    ``perf_mode``: ``"none"`` or ``"double_row"``; ``accumulate``: accumulated into PSUM."""

    K: int
    M: int
    N: int
    in_dtype: str
    perf_mode: str
    accumulate: bool


class Transpose(NamedTuple):
    """``nc_transpose`` of a ``(P, F)`` tile, on TensorE (through PSUM) or VectorE (32x32 blocks)."""

    P: int
    F: int
    in_dtype: str
    on_tensor_engine: bool
    psum_in: bool
    psum_out: bool


class Elementwise(NamedTuple):
    """copy / memset / tensor_scalar / tensor_tensor / activation / iota / select / ... .
    ``elems``: elements per partition; ``n_ops``: ALU ops per element; ``strided``: the innermost
    free axis steps more than 16 bytes; ``eviction``: a PSUM -> SBUF copy; ``reduce``: the
    instruction also writes a per-partition accumulation (``activation(reduce_res=...)`` & co.)."""

    func: str
    elems: int
    n_ops: int
    strided: bool
    psum_in: bool
    psum_out: bool
    eviction: bool
    reduce: bool


class Reduce(NamedTuple):
    """A reduction: ``tensor_reduce`` / ``nl.sum`` & co. (``axes`` free axes reduced), the
    per-partition statistics (``bn_stats``, ``bn_aggr``, ``max8``), and the cross-partition
    ``tensor_partition_reduce`` (``axes == 0``: the partition axis)."""

    func: str
    elems: int
    axes: int


class Dma(NamedTuple):
    """A DMA.  ``src`` None: a constant written to HBM (a scalar assignment); ``descriptors``: the
    contiguous runs of the HBM side; ``contiguous_bytes``: bytes per run; ``partition_start``: the
    first partition of the on-chip side (0 for HBM -> HBM); ``indirect``: addresses read from index
    tiles; ``transpose``: a transposing DMA; ``rmw``: a read-modify-write of the destination."""

    src: Buffer | None
    dst: Buffer
    descriptors: int
    contiguous_bytes: int
    partition_start: int
    indirect: bool
    transpose: bool
    rmw: bool


PAYLOADS = (Matmul, Transpose, Elementwise, Reduce, Dma)
Payload = Matmul | Transpose | Elementwise | Reduce | Dma


class Event(NamedTuple):
    """One executed instruction.

    seq        position in program order (0-based, per run; the index in ``Trace.events``)
    op         ISA-level name: "dma_copy", "nc_matmul", "nc_transpose", "tensor_tensor", ...
    api        the NKI call that produced it ("nl.load", "nisa.nc_matmul", "dst[...] = v", ...)
    engine     the :class:`Engine`
    partitions partitions the instruction spans (P); for DMA, of the SBUF side (or of the
               destination's leading axis for HBM->HBM); for a matmul the stationary partitions
    free_elems elements per partition processed (N in trn2-hardware.md §4.2); for nc_matmul the
               moving free size; for DMA the total elements / partitions
    in_shapes, out_shape, in_dtypes, out_dtype: as the instruction saw them
    bytes      bytes moved (DMA: bytes transferred; compute: bytes read + written)
    flops      arithmetic operations (matmul: 2*K*M*N; elementwise: P*N per op)
    reads, writes  Regions read / written (PSUM accumulation reads and writes its target)
    payload    the instruction-class record (:data:`PAYLOADS`)
    file, line kernel source location (first frame outside nki_kernels.sim)
    program_id SPMD instance index tuple (() without a grid)
    loops      enclosing loops, outermost first (:class:`LoopFrame`)
    engine_given  the kernel's call named the engine (``engine=``): the compiler does not re-place it
    """

    seq: int
    op: str
    api: str
    engine: Engine
    partitions: int
    free_elems: int
    in_shapes: tuple
    out_shape: tuple
    in_dtypes: tuple
    out_dtype: str
    bytes: int
    flops: int
    reads: tuple
    writes: tuple
    payload: Payload
    file: str
    line: int
    program_id: tuple
    loops: tuple
    engine_given: bool = False

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


for _cls in (Region, LoopFrame, Event) + PAYLOADS:
    _cls.__eq__ = _eq  # type: ignore[method-assign]
    _cls.__ne__ = _ne  # type: ignore[method-assign,assignment]
    _cls.__hash__ = _hash  # type: ignore[method-assign]


class IsaOp(StrValued):
    """Every instruction the interpreter records (``Event.op`` holds its value): the compute instructions
    (PE / ACT / DVE / POOL) and the DMAs.  The cost model's table is keyed by it (perf/costs.py COMPUTE_COSTS,
    GENERIC_COST; DMAs by dma_cost): simulator_tests/test_perf_costs_cover_ops.py fails when one has no cost
    decision, and RunContext.record refuses a name that is not one of these.  A member equals and hashes like
    its value (StrValued), so ``ev.op == IsaOp.NC_MATMUL`` and ``COMPUTE_COSTS[ev.op]`` work on the recorded strings."""

    # compute
    ACTIVATION = "activation"
    ACTIVATION_REDUCE = "activation_reduce"
    AFFINE_SELECT = "affine_select"
    BN_AGGR = "bn_aggr"
    BN_STATS = "bn_stats"
    DROPOUT = "dropout"
    GATHER_FLATTENED = "gather_flattened"
    IOTA = "iota"
    LOCAL_GATHER = "local_gather"
    MAX8 = "max8"
    MEMSET = "memset"
    NC_FIND_INDEX8 = "nc_find_index8"
    NC_MATCH_REPLACE8 = "nc_match_replace8"
    NC_MATMUL = "nc_matmul"
    NC_STREAM_SHUFFLE = "nc_stream_shuffle"
    NC_TRANSPOSE = "nc_transpose"
    RAND = "rand"
    RANGE_SELECT = "range_select"
    RECIPROCAL = "reciprocal"
    SCALAR_TENSOR_TENSOR = "scalar_tensor_tensor"
    SELECT_REDUCE = "select_reduce"
    SEQUENCE_BOUNDS = "sequence_bounds"
    TENSOR_COPY = "tensor_copy"
    TENSOR_COPY_DYNAMIC = "tensor_copy_dynamic"
    TENSOR_COPY_PREDICATED = "tensor_copy_predicated"
    TENSOR_PARTITION_REDUCE = "tensor_partition_reduce"
    TENSOR_REDUCE = "tensor_reduce"
    TENSOR_SCALAR = "tensor_scalar"
    TENSOR_SCALAR_CUMULATIVE = "tensor_scalar_cumulative"
    TENSOR_SCALAR_REDUCE = "tensor_scalar_reduce"
    TENSOR_TENSOR = "tensor_tensor"
    TENSOR_TENSOR_SCAN = "tensor_tensor_scan"
    TOPK = "topk"
    TRANSPOSE = "transpose"
    # DMA (queues, collectives): keep them last (DMA_OPS)
    DMA_COPY = "dma_copy"
    DMA_TRANSPOSE = "dma_transpose"
    DMA_COMPUTE = "dma_compute"
    ALL_GATHER = "all_gather"
    ALL_REDUCE = "all_reduce"
    ALL_TO_ALL = "all_to_all"
    COLLECTIVE_PERMUTE = "collective_permute"
    COLLECTIVE_PERMUTE_IMPLICIT = "collective_permute_implicit"
    COLLECTIVE_PERMUTE_IMPLICIT_REDUCE = "collective_permute_implicit_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    SENDRECV = "sendrecv"


_ISA = list(IsaOp)
DMA_OPS = frozenset(_ISA[_ISA.index(IsaOp.DMA_COPY) :])  # (the members from the "DMA" section on)
COMPUTE_OPS = frozenset(IsaOp) - DMA_OPS


class LoopRun(NamedTuple):
    """A loop that ran as a loop program: ``trips`` iterations of ``per_iteration`` instructions from event
    ``first`` on, iteration k's instructions those of iteration 0 with their addresses moved (the program proved
    it: core/program.py build); ``file``/``line`` the loop's.  The tiles the body allocates anew each iteration:
    iteration k's are allocation ids ``first_alloc + k * allocs_per_iteration`` onwards, ``allocs_per_iteration``
    of them (every other tensor the body writes exists before the loop)."""

    first: int
    per_iteration: int
    trips: int
    file: str
    line: int
    first_alloc: int = 0
    allocs_per_iteration: int = 0


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
    # alloc ids of the SBUF/PSUM tensors the kernel placed itself (NKI 0.1 ncc.sbuf/psum.alloc/mod_alloc, NKI 0.7
    # address=): the compiler's allocator does not re-place them
    placed_allocs: set = field(default_factory=set)
    # the loops that ran as loop programs (core/program.py): events[first + k * per_iteration + j] is instruction j
    # of iteration k, the same instruction in every iteration but for its addresses (what the cost model may
    # take as periodic: perf/steady.py)
    loop_runs: list = field(default_factory=list)
    note: str | None = None

    def __len__(self) -> int:
        return len(self.events)

    def by_engine(self) -> dict:
        out: dict = {e: [] for e in ENGINES}
        for ev in self.events:
            out.setdefault(ev.engine, []).append(ev)
        return out


@contextmanager
def no_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (back on after it if it was on): building a trace
    (a loop program's events) or scheduling one allocates millions of small tuples that never make a cycle,
    and each full collection would walk the whole trace (a third of the CPU time of a 100k-instruction
    estimate; most of a loop program's event building).

    When the block kept many objects, they join the oldest generation on the way out (``gc.freeze`` then
    ``gc.unfreeze``: two list splices) instead of being walked by the next young collection: a million-event
    trace cost 0.6 s of CPU there.  They are collected as before, by the next full collection."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_count()[0] > PROMOTE_KEPT:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


PROMOTE_KEPT = 100_000  # objects a no_gc block kept (allocated minus freed) from which they skip the young collections
