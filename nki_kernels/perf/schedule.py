"""The scheduler: a discrete-event simulation of one NeuronCore over an instruction trace.

Model (trn2-hardware.md §4.1 with its 2026-12-01 correction), all times in ns:

* **Dependencies** (:func:`build_dependencies`) through the byte regions each instruction
  reads and writes: RAW always; WAR and WAW for on-chip buffers (SBUF/PSUM).  *Renaming* stands
  for the compiler's allocator (compiler.Allocation): a tile allocated inside a loop, and a tile
  written *whole* inside a loop (no read of it by the same instruction, the write covers every
  byte touched so far), is a new version that takes one of ``depth`` physical copies -- in any
  loop kind and any build -- so its first write waits only for the accesses of the version
  ``depth`` writes back, not for the readers of the previous value.  Slot identity is the
  allocation's explicit ``name=`` when one was given, else its allocation site together with the
  first-writing source line.  A tile the kernel placed itself (``ncc.sbuf.alloc``/``mod_alloc``)
  keeps one place.

* **Loop-invariant transposes** (:func:`loop_invariant_transposes`): ``nl.matmul(x, y)`` with
  ``transpose_x=False`` records a TensorE transpose of ``x`` and a copy out of PSUM.  When
  the same call site transposes the same, unchanged bytes of ``x`` again inside a loop, the
  compiler hoists the work out of the loop (loop-invariant code motion); the repeated pair is
  *elided*: it costs nothing and finishes when the first pair has.

* **Compute engines** PE, ACT, DVE, POOL each run their instructions by **list scheduling
  over a window**: when the engine is free it starts, among the next ``ModelOptions.window``
  instructions of its program-order queue that have not started, the first one (in program
  order) whose dependencies are satisfied; if none is ready it waits for the earliest.  The
  NKI language guide states that the compiler may reorder operations without data
  dependencies (``nki/get-started/nki-language-guide.rst``); ``window = 1`` is strict
  program order.  A dependency costs the semaphore hop ``sem_ns`` across engines (+ the
  TensorE result latency after a TensorE instruction) or the dependent-instruction bubble on
  the same engine (not for TensorE accumulation chains).

* **TensorE**: each instruction costs its initiation interval (costs.py) plus
  ``pe_instr_overhead_cycles``; LoadStationary (``M/4`` cycles) is exposed only when the
  stationary operand changes and the previous matmul is shorter than it.  **Throttle**
  (dI/dt, PX ``overview-summary-page.rst`` "Understanding throttling"): fixed windows of
  ``pe_throttle_window_ns``; a window runs at ``pe_throttle_speed`` (50 %) when TensorE was busy
  less than ``pe_throttle_util`` of the previous one (:class:`_TensorEngineState`).

* **DMAs** become ready when their dependencies finish; the DMA queue is list-scheduled like
  an engine (the first ready DMA, in program order, among the next ``window``).  In
  ``benchmark`` mode on a core with hardware DGE (``dge_queues`` > 0: two DGE instances per
  NeuronCore-v3, DG/A2, + GpSimd's software DGE) each DMA occupies the first free DGE queue (or
  the first queue only, :meth:`ModelOptions.serial_dma`) for ``dge_issue_ns``; the rest of
  the documented ~600 ns execution time of a DGE instruction (``dge_exec_ns``) is latency that overlaps other work.
  Without hardware DGE (``profile`` mode = ``--disable-dge``, or trn1) a ~50 ns static
  trigger issues a DMA with pre-computed descriptors.  At most ``dma_max_inflight`` DMAs are
  in flight.  After ``dma_latency_ns`` the data moves on ``ceil(P/8)`` DMA engines (partition
  p on engine p // 8); each engine serves its DMAs FIFO, busy for max(control, data) per DMA:
  control = ``dma_fixed_hwdge_ns`` (or ``dma_fixed_static_ns``) + ``dma_desc_ns`` per
  descriptor, data = bytes at 23 B/ns (costs.py).

The kernel floor T0 is added by the caller (``nki_kernels.perf.model``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

import numpy as np

from nki_kernels.sim.core.trace import Event, Matmul, no_gc

from .compiler import allocation, place_engines, psum_zero_folds, redundant_loads
from .costs import DmaCost, compute_cost_ns, dma_cost, load_stationary_cycles, pe_instructions
from .hardware import HardwareSpec, get_hardware
from .steady import FIRST_TRY, MAX_CYCLE, TOLERANCE, note, same, segments

MODES = ("benchmark", "profile")
SKIP_ISSUE = ("serial", "by-loop", "parallel")
FRONTENDS = ("nki01", "nki07")
ONCHIP = ("sbuf", "psum")
_ONCHIP_BUFFERS = frozenset(ONCHIP)  # (a Buffer hashes and compares as its string)
COMPUTE_ENGINES = ("PE", "ACT", "DVE", "POOL")

# The list-scheduling window (instructions per engine queue).  Fitted (F) among 16, 32, 64 on the
# calibration set (nki_kernels.perf.calibration.OPTION_CHOICES): no public source gives the
# compiler's look-ahead; the public attention profiles (trainium-kernel-fusion neuron-profile JSON)
# show the compiler interleaving a few loop iterations, not overlapping whole phases, which a deep
# window over-states (fused attention estimates 10-25 % fast at 64).
SCHEDULE_WINDOW = 16


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Knobs of the scheduler.

    mode               "benchmark": what nki.benchmark's NCL latency measures (HW-DGE issues each
                       DMA); "profile": neuron-profile ``total_time`` of a ``--disable-dge`` build.
    psum_buffers       PSUM banks a PSUM tile written in a loop rotates through (fitted, see
                       calibration.py); SBUF tiles get the allocator's depth (compiler.allocation)
    window             list-scheduling window per engine (1 = strict program order)
    rename             a tile written whole inside a loop starts a new version (compiler.allocation)
    hoist_transposes   elide repeated loop-invariant nl.matmul transposes of x
    include_floor      add the kernel floor T0 (launch + I/O + semaphores)
    frontend           "nki01" (neuronxcc.nki) or "nki07" (import nki): which compiler front end
                       built the kernel (its DMA descriptor generation differs, compiler.py)
    middle_end         False for kernels built with ``skip_middle_end_transformations`` (CS149 starters):
                       no load elimination; DMAs issued as ``skip_issue`` says
    dedup_loads        serve repeated nl.load reads from SBUF (compiler.redundant_loads)
    place_engines      place copies / scalar ops without engine= like the compiler (compiler.place_engines)
    fold_psum_zeros    a PSUM fill followed by an accumulating matmul costs nothing (compiler.psum_zero_folds)
    serialise          no pipelining at all: one physical copy of every tile and strict program order
                       (window 1); the slow alternative of a loop of tiny instructions (model.alternatives)
    skip_issue         how a skip_middle_end build issues its DMAs (fitted among SKIP_ISSUE):
                       "serial" every DMA from one queue; "parallel" from the ``dge_queues`` queues;
                       "by-loop" DMAs whose innermost loop is an affine_range from one queue, the
                       others from all (the CS149 ladder vs the §3.1c conv, docs/cost-model.md)
    """

    mode: str = "benchmark"
    psum_buffers: int = 3
    window: int = SCHEDULE_WINDOW
    rename: bool = True
    hoist_transposes: bool = True
    include_floor: bool = True
    frontend: str = "nki01"
    middle_end: bool = True
    dedup_loads: bool = True
    place_engines: bool = True
    skip_issue: str = "by-loop"
    fold_psum_zeros: bool = True
    serialise: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ModelOptions(mode): got {self.mode!r}, allowed {MODES}")
        if self.frontend not in FRONTENDS:
            raise ValueError(f"ModelOptions(frontend): got {self.frontend!r}, allowed {FRONTENDS}")
        if self.psum_buffers < 1:
            raise ValueError(f"ModelOptions(psum_buffers): got {self.psum_buffers}, must be >= 1")
        if self.skip_issue not in SKIP_ISSUE:
            raise ValueError(f"ModelOptions(skip_issue): got {self.skip_issue!r}, allowed {SKIP_ISSUE}")
        if self.window < 1:
            raise ValueError(f"ModelOptions(window): got {self.window}, must be >= 1 (1 = program order)")

    def dma_mode(self, hw: HardwareSpec) -> str:
        """ "hwdge" (descriptors generated by the DGE queues) or "static" (pre-computed)."""
        return "hwdge" if self.mode == "benchmark" and hw.v("dge_queues") >= 1 else "static"

    def issue_queues(self, hw: HardwareSpec) -> int:
        """DMA issue queues: the descriptor-generating queues in DGE mode -- NKI 0.1 builds issue from
        the Sync and Scalar hardware DGEs and GpSimd software DGE (``dge_queues``); the NKI 0.7 tutorial
        build generated every descriptor on GpSimd (``dge_queues_serial``); one static trigger queue
        without DGE.  Which DMAs may use more than the first queue: :meth:`serial_dma`."""
        if self.dma_mode(hw) != "hwdge":
            return 1
        if self.frontend == "nki07":
            return max(1, int(hw.v("dge_queues_serial")))
        return max(1, int(hw.v("dge_queues")))

    def serial_dma(self, ev: Event) -> bool:
        """True when ``ev`` (a DMA) is issued from the first queue only, one after the other: every DMA
        of a skip_middle_end build with ``skip_issue="serial"``; with "by-loop" (the fitted choice) the
        DMAs whose innermost loop is an ``affine_range`` -- the CS149 part 1 ladder and transpose
        (affine loops) ran ~490-630 ns per DMA back to back, the §3.1c conv (sequential loops) issued
        2,660 row DMAs in 824 us, which one queue at ~550 ns cannot (docs/cost-model.md)."""
        if self.middle_end or self.frontend == "nki07" or self.skip_issue == "parallel":
            return False
        return self.skip_issue == "serial" or _loop_kind(ev) == "affine"


class DmaTiming(NamedTuple):
    """When one DMA became ready, issued (on DGE queue ``dge``) and moved its data (in slot ``queue``)."""

    ready: float
    issue_start: float
    issue_end: float
    data_start: float
    data_end: float
    queue: int
    cost: DmaCost
    dge: int = 0


@dataclass
class Schedule:
    start: list
    end: list
    engine_of: list
    dma: dict  # event index -> DmaTiming
    deps: list
    busy_ns: dict  # engine -> busy ns (DMA: union of data-transfer time)
    issue_busy_ns: float
    makespan_ns: float
    uncosted_ops: dict = field(default_factory=dict)
    throttled_ns: float = 0.0
    exposed_ls_ns: float = 0.0
    elided: dict = field(default_factory=dict)  # event index -> the event it repeats (hoisted)
    reordered: int = 0  # instructions started ahead of program order
    steady: str = ""  # what the scheduler wrote from repeating cycles of loop programs (perf/steady.py), and why not


# ---- what the scheduler reads of a trace ---------------------------------------------------


class TraceFacts:
    """What the cost model reads of each event, as plain Python values (engine names as ``str``, whether it is a
    DMA), computed once per event list, plus a memo of the
    analyses that depend only on the events (and the options named in their key): the schedules of one
    estimate (the modelled one and its alternatives, model.alternatives) share it instead of re-reading
    every event.  Nothing in it depends on a ModelOptions field or a hardware value unless its memo key
    says so."""

    __slots__ = ("events", "n", "engine", "is_dma", "runs", "memo")

    def __init__(self, events: Sequence[Event], runs: Sequence = ()):
        """``runs``: the trace's loop programs (``Trace.loop_runs``), whose iterations the scheduler may take as
        repeating (perf/steady.py: checked, never assumed)."""
        self.events = events
        self.n = len(events)
        self.runs = tuple(runs)
        names = _ENGINE_NAMES
        eng = [names.get(ev.engine) or str(ev.engine) for ev in events]
        self.engine = eng
        self.is_dma = [e == "DMA" for e in eng]
        self.memo: dict = {}

    def scaled(self, events: Sequence[Event]) -> TraceFacts:
        """The facts of ``events``, this list with some events doing the work of several
        (compiler._scaled: elements, bytes, FLOPs and payload sizes change; engines, regions, loops,
        ops and source lines do not): what is read here is shared, with the memo of the analyses
        that read only those (hoisted transposes, folded PSUM fills, loop kinds)."""
        if len(events) != self.n:
            raise ValueError("TraceFacts.scaled: the scaled trace has another length")
        out = TraceFacts.__new__(TraceFacts)
        out.events = events
        out.n = self.n
        out.engine, out.is_dma, out.runs = (
            self.engine,
            self.is_dma,
            self.runs,  # (the scheduler checks what it reads of each iteration: scaled events do not repeat alike)
        )
        out.memo = {k: v for k, v in self.memo.items() if k in _SCALING_INVARIANT}
        return out

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The memoised value of ``make()`` under ``key``."""
        try:
            return self.memo[key]
        except KeyError:
            v = self.memo[key] = make()
            return v


_SCALING_INVARIANT = ("transposes", "psum_folds", "loop_kinds")
_ENGINE_NAMES = {e: e for e in ("PE", "ACT", "DVE", "POOL", "DMA")}


def _compute_cost_key(ev: Event) -> tuple:
    """Everything costs.compute_cost_ns reads of a compute instruction (besides the engine it is given)."""
    p = ev.payload
    psum = any(r.buffer == "psum" for r in ev.reads) or any(r.buffer == "psum" for r in ev.writes)
    return (
        ev.op,
        ev.engine,
        ev.partitions,
        ev.free_elems,
        ev.in_dtypes,
        ev.out_dtype,
        ev.out_shape,
        type(p),
        *(p or ()),
        psum,
    )


def _facts(events: Sequence[Event], facts: TraceFacts | None) -> TraceFacts:
    if facts is not None and facts.events is events:
        return facts
    return TraceFacts(events)


# ---- dependencies -----------------------------------------------------------------------


class _RegionMap:
    """Per-allocation (per version) sorted, non-overlapping segments [lo, hi, writer, readers];
    ``los`` mirrors the segment starts for bisect."""

    __slots__ = ("segs", "los")

    def __init__(self):
        self.segs = []
        self.los = []

    def _split(self, x):
        i = bisect_right(self.los, x) - 1
        if i >= 0:
            s = self.segs[i]
            if s[0] < x < s[1]:
                self.segs.insert(i + 1, [x, s[1], s[2], dict(s[3])])
                self.los.insert(i + 1, x)
                s[1] = x

    def _range(self, lo, hi):
        segs = self.segs
        i = max(0, bisect_right(self.los, lo) - 1)
        while i < len(segs) and segs[i][1] <= lo:
            i += 1
        j = i
        while j < len(segs) and segs[j][0] < hi:
            j += 1
        return i, j

    def covered_by(self, lo, hi) -> bool:
        """True when [lo, hi) covers every byte accessed so far (a whole-tile overwrite)."""
        return bool(self.segs) and lo <= self.segs[0][0] and hi >= self.segs[-1][1]

    def read(self, lo, hi, who, reader_key, deps, track_readers):
        segs = self.segs
        if not segs:
            return
        if len(segs) == 1:  # one segment inside [lo, hi): no split, it is the range
            s = segs[0]
            if lo <= s[0] < s[1] <= hi:
                if s[2] is not None:
                    deps.add(s[2])
                if track_readers:
                    s[3][reader_key] = who
                return
        if track_readers:
            self._split(lo)
            self._split(hi)
        i, j = self._range(lo, hi)
        for k in range(i, j):
            s = segs[k]
            if s[2] is not None:
                deps.add(s[2])
            if track_readers:
                s[3][reader_key] = who

    def write(self, lo, hi, who, deps, war):
        segs = self.segs
        if not segs or segs[-1][1] <= lo:  # a first write, or past the end (streaming stores)
            segs.append([lo, hi, who, {}])
            self.los.append(lo)
            return
        if len(segs) == 1:  # one segment inside [lo, hi): replaced whole
            s = segs[0]
            if lo <= s[0] < s[1] <= hi:
                if war:
                    if s[2] is not None:
                        deps.add(s[2])
                    deps.update(s[3].values())
                segs[0] = [lo, hi, who, {}]
                self.los[0] = lo
                return
        self._split(lo)
        self._split(hi)
        i, j = self._range(lo, hi)
        if war:
            for k in range(i, j):
                s = segs[k]
                if s[2] is not None:
                    deps.add(s[2])
                deps.update(s[3].values())
        segs[i:j] = [[lo, hi, who, {}]]
        self.los[i:j] = [lo]

    def accessors_into(self, out: set) -> None:
        """Add every writer and reader of the map to ``out``."""
        for s in self.segs:
            if s[2] is not None:
                out.add(s[2])
            out.update(s[3].values())

    def all_accessors(self) -> set:
        out: set = set()
        self.accessors_into(out)
        return out


def _accumulates(ev) -> bool:
    p = ev.payload
    return type(p) is Matmul and p.accumulate


def _loop_kind(ev) -> str | None:
    """The kind of the innermost enclosing loop (None outside loops).  An SPMD ``program_id`` alone
    is not a loop: NKI 0.7 traces carry ``(0,)`` on every instruction (LNC wrapping)."""
    if ev.loops:
        return str(ev.loops[-1].kind)
    return None


class _DependencyBuilder:
    """One pass over the trace in program order; ``deps[i]`` = earlier events event i waits for."""

    def __init__(
        self,
        opts: ModelOptions,
        alloc_origins: dict | None,
        alloc_names: dict | None,
        hw: HardwareSpec | None = None,
        peak_sbuf: int = 0,
        placed: frozenset | set = frozenset(),
    ):
        self.opts = opts
        self.alloc = allocation(get_hardware(hw if hw is not None else "trn2"), placed, peak_sbuf, opts)
        self.origins = alloc_origins or {}
        self.names = alloc_names or {}
        self.maps: dict = {}  # alloc_id -> _RegionMap of its current version
        self.rings: dict = {}  # buffer identity -> deque of versions (_RegionMap)

    def identity(self, alloc_id, buffer, ev):
        """Which rotating slots a new tile takes: its explicit name, else where it was
        allocated and first written (distinct tiles from one helper line stay distinct)."""
        name = self.names.get(alloc_id)
        if name:
            return ("name", name, buffer)
        return ("site", self.origins.get(alloc_id), ev.file, ev.line, ev.op, buffer)

    def run(self, events: Sequence[Event], facts: TraceFacts, serialised_too: bool = False) -> tuple:
        """(deps of every event, and with ``serialised_too`` the deps the same options with ``serialise``
        give, else None) -- what :meth:`_event` does for each event, inlined: this loop runs once per
        instruction.  The two differ only in which earlier version a rotation waits for (``depth``
        versions back, or the last one: one physical copy): the region maps and the rings of versions
        evolve alike (a ring kept ``depth`` long still holds the last version)."""
        maps = self.maps
        rings = self.rings
        alloc = self.alloc
        direct = alloc.direct
        rename = self.opts.rename
        names = self.names
        origins = self.origins
        new_map = _RegionMap
        depth_memo: dict = {}
        out: list = []
        append = out.append
        out1: list = []
        append1 = out1.append
        onchip_buffers = _ONCHIP_BUFFERS
        for i, (ev, is_dma, engine) in enumerate(zip(events, facts.is_dma, facts.engine, strict=True)):
            deps: set = set()
            extra: set | None = None  # rotations: the version ``nbuf`` back
            extra1: set | None = None  # and the last version (serialised)
            reads = ev.reads or ()
            if reads:
                key = ("DMA", i) if is_dma else engine
                for aid, buffer, lo, hi in reads:  # (Region)
                    m = maps.get(aid)
                    if m is None:
                        maps[aid] = new_map()  # (an empty map: the read finds no writer)
                    else:
                        m.read(lo, hi, i, key, deps, buffer in onchip_buffers)
            in_loop = ev.loops
            for aid, buffer, lo, hi in ev.writes or ():
                m = maps.get(aid)
                onchip = buffer in onchip_buffers
                if onchip and in_loop:
                    dk = (buffer, hi - lo, aid in direct)
                    nbuf = depth_memo.get(dk)
                    if nbuf is None:
                        nbuf = depth_memo[dk] = alloc.depth(buffer, hi - lo, aid)
                    if m is None:  # first write of a tile allocated in a loop: rotate (see _rotate)
                        m = maps[aid] = new_map()
                        name = names.get(aid)
                        ident = (
                            ("name", name, buffer)
                            if name
                            else ("site", origins.get(aid), ev.file, ev.line, ev.op, buffer)
                        )
                        ring = rings.get(ident)
                        if ring is None:
                            ring = rings[ident] = deque()
                        if serialised_too:
                            if extra is None:
                                extra, extra1 = set(), set()
                            if ring:
                                ring[-1].accessors_into(extra1)
                            if len(ring) >= nbuf:
                                ring[-nbuf].accessors_into(extra)
                        elif len(ring) >= nbuf:
                            ring[-nbuf].accessors_into(deps)
                        ring.append(m)
                        while len(ring) > nbuf:
                            ring.popleft()
                    elif (
                        rename and not any(r[0] == aid for r in reads) and not _accumulates(ev) and m.covered_by(lo, hi)
                    ):
                        # whole overwrite: retire the current version, start a new one in the
                        # buffer of the version nbuf back (nbuf = 1: no renaming)
                        ring = rings.setdefault(("version", aid), deque())
                        ring.append(m)
                        if serialised_too:
                            if extra is None:
                                extra, extra1 = set(), set()
                            m.accessors_into(extra1)
                            if len(ring) >= nbuf:
                                ring[-nbuf].accessors_into(extra)
                        elif len(ring) >= nbuf:
                            ring[-nbuf].accessors_into(deps)
                        while len(ring) > nbuf:
                            ring.popleft()
                        m = maps[aid] = new_map()
                if m is None:
                    m = maps[aid] = new_map()
                m.write(lo, hi, i, deps, onchip)
            if extra is not None and extra1 is not None:  # a rotation: the version it waits for differs
                d1 = deps | extra1
                d1.discard(i)
                append1(sorted(d1))
                deps |= extra
            if deps:
                deps.discard(i)  # (every recorded access is by an event <= i)
                d = sorted(deps)
            else:
                d = []
            append(d)
            if serialised_too and extra is None:
                append1(d)  # (no rotation: both wait for the same; one list, read only like all of them)
        return out, (out1 if serialised_too else None)


def build_dependencies(
    events: Sequence[Event],
    opts: ModelOptions,
    alloc_origins: dict | None = None,
    alloc_names: dict | None = None,
    hw: HardwareSpec | None = None,
    peak_sbuf: int = 0,
    placed: frozenset | set = frozenset(),
    facts: TraceFacts | None = None,
) -> list:
    """deps[i] = sorted earlier event indices that event i must wait for (an elided repeat --
    loop-invariant transpose, redundant load -- waits only for the instruction it repeats); ``placed``: the
    allocations the kernel placed itself (``Trace.placed_allocs``); ``facts``: the events' TraceFacts when
    the caller has them (shared across the schedules of one estimate)."""
    with no_gc():
        facts = _facts(events, facts)
        b = _DependencyBuilder(opts, alloc_origins, alloc_names, hw, peak_sbuf, placed)
        # the pass reads the options only through ``rename`` and the allocation: its result is kept in
        # ``facts`` for the other schedules of the estimate (their elisions are applied per call)
        key = ("raw_deps", opts.rename, b.alloc, id(b.origins), id(b.names))
        hit = facts.memo.get(key)
        if hit is not None and hit[0] is b.origins and hit[1] is b.names:
            raw = hit[2]
        else:
            serialised_too = not b.alloc.serialise and facts.memo.get(WANT_SERIALISED, False)
            raw, raw1 = b.run(events, facts, serialised_too)
            facts.memo[key] = (b.origins, b.names, raw)
            if raw1 is not None:
                key1 = ("raw_deps", opts.rename, replace(b.alloc, serialise=True), id(b.origins), id(b.names))
                facts.memo[key1] = (b.origins, b.names, raw1)
        deps = list(raw)  # (the lists inside are shared: no caller edits them)
        for j, orig in elisions(events, opts, hw, facts).items():
            if orig >= 0:  # a repeat waits for what it repeats; a folded fill keeps its own dependencies
                deps[j] = [orig]
    return deps


# TraceFacts.memo flag: the not-pipelined alternative (serialise) will be scheduled, so the dependency
# pass of the other options builds its dependencies too (model.alternatives)
WANT_SERIALISED = "want_serialised"


def elisions(
    events: Sequence[Event], opts: ModelOptions, hw: HardwareSpec | None = None, facts: TraceFacts | None = None
) -> dict:
    """{index of an instruction the compiler removes: index of the one it repeats, or -1}: repeated
    loop-invariant ``nl.matmul`` transposes, for NKI 0.1 builds repeated ``nl.load`` reads
    (compiler.redundant_loads), and PSUM fills folded into the first matmul (compiler.psum_zero_folds, -1)."""
    f = _facts(events, facts)
    out = dict(f.get("transposes", lambda: loop_invariant_transposes(events))) if opts.hoist_transposes else {}
    if opts.fold_psum_zeros:
        out.update(dict.fromkeys(f.get("psum_folds", lambda: psum_zero_folds(events)), -1))
    if opts.dedup_loads and opts.middle_end and opts.frontend == "nki01":
        budget = get_hardware(hw if hw is not None else "trn2").v("load_reuse_budget_bytes")
        out.update(f.get(("loads", budget), lambda: redundant_loads(events, budget)))
    return out


def loop_invariant_transposes(events: Sequence[Event]) -> dict:
    """{index of a repeated nl.matmul transpose/copy pair member: index of the first one}.

    A pair is repeated when, inside a loop, the same source line transposes the same bytes of
    the same allocation with no write to that allocation since the first pair."""
    if "nl.matmul" not in set(map(_API, events)):  # (a C-speed look first)
        return {}
    last_writer: dict = {}
    first: dict = {}  # invariance key -> [transpose index, copy index]
    out_of: dict = {}  # PSUM alloc written by a transpose -> (record, elided?)
    elided: dict = {}
    for i, ev in enumerate(events):
        if ev.api == "nl.matmul" and ev.op == "nc_transpose" and ev.loops and ev.reads:
            key = (ev.file, ev.line, tuple((r.alloc_id, r.lo, r.hi, last_writer.get(r.alloc_id, -1)) for r in ev.reads))
            rec = first.get(key)
            if rec is not None and rec[1] is not None:
                elided[i] = rec[0]
                for w in ev.writes:
                    out_of[w.alloc_id] = (rec, True)
            elif rec is None:
                rec = first[key] = [i, None]
                for w in ev.writes:
                    out_of[w.alloc_id] = (rec, False)
        elif ev.api == "nl.matmul" and ev.op == "tensor_copy" and ev.reads:
            hit = out_of.pop(ev.reads[0].alloc_id, None)
            if hit is not None:
                rec, is_repeat = hit
                if is_repeat:
                    elided[i] = rec[1]
                else:
                    rec[1] = i
        for w in ev.writes or ():
            last_writer[w.alloc_id] = i
    return elided


# ---- the simulation ---------------------------------------------------------------------


def _union_length(dmas: Iterable[DmaTiming]) -> float:
    """The length of the union of the DMAs' data transfers [data_start, data_end]: the intervals sorted, merged
    where they touch or overlap, the merged lengths summed in order (left to right, as a loop would)."""
    recs = list(dmas)
    if not recs:
        return 0.0
    s = np.fromiter(map(_DATA_START, recs), np.float64, len(recs))
    e = np.fromiter(map(_DATA_END, recs), np.float64, len(recs))
    order = np.lexsort((e, s))
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # (e >= s: within a merged interval, the furthest end so far is its own)
    first = np.flatnonzero(np.concatenate(([True], s[1:] > reach[:-1])))
    last = np.concatenate((first[1:] - 1, [len(s) - 1]))
    return float(np.add.accumulate(reach[last] - s[first])[-1])


_DATA_START, _DATA_END = itemgetter(3), itemgetter(4)  # DmaTiming.data_start, .data_end
_API = attrgetter("api")


_DONE, _WAKE = 0, 1
_new_tuple = tuple.__new__  # a NamedTuple from a tuple, at C speed


class _TensorEngineState:
    """LoadStationary exposure, per-instruction overhead and the dI/dt throttle.

    Throttle (PX ``overview-summary-page.rst`` "Understanding throttling", checked against the
    hardware-activity windows of the public trainium-kernel-fusion neuron-profile JSON): time is cut
    into fixed windows of ``pe_throttle_window_ns`` (4096 cycles of the 1.2 GHz profiler clock); the
    TensorE utilisation limit of a window is ``pe_throttle_speed`` (50 %) when TensorE was busy less
    than ``pe_throttle_util`` of the previous window, else 100 %.  Before the kernel TensorE is idle,
    so its first window is throttled.  An instruction runs at the limit of the window it starts in."""

    def __init__(self, hw: HardwareSpec):
        self.hw = hw
        self.clock = hw.v("pe_clock_ghz")
        self.overhead_ns = hw.v("pe_instr_overhead_cycles") / self.clock
        self.W = hw.v("pe_throttle_window_ns")
        self.util = hw.v("pe_throttle_util")
        self.floor_speed = hw.v("pe_throttle_speed")
        self.busy_in: dict = {}  # window index -> TensorE busy ns in it
        self.limit_of: dict = {}  # window index -> utilisation limit (memo)
        self.last_end = -1.0
        self.last_nominal = 0.0
        self.last_stationary: tuple | None = None
        self.throttled_ns = 0.0
        self.exposed_ls_ns = 0.0

    def _add_busy(self, s: float, e: float) -> None:
        w = int(s // self.W)
        while s < e:
            edge = (w + 1) * self.W
            self.busy_in[w] = self.busy_in.get(w, 0.0) + min(e, edge) - s
            s, w = edge, w + 1

    def speed(self, s: float) -> float:
        """Utilisation limit at time s: set by TensorE's busy fraction in the previous window."""
        w = int(s // self.W)
        lim = self.limit_of.get(w)
        if lim is None:
            lim = 1.0 if self.busy_in.get(w - 1, 0.0) >= self.util * self.W else self.floor_speed
            self.limit_of[w] = lim
        return lim

    def duration(self, ev, s, nominal) -> float:
        nominal += self.overhead_ns * pe_instructions(ev, self.hw)
        if ev.op == "nc_matmul":
            key = (ev.reads[0].alloc_id, ev.reads[0].lo, ev.reads[0].hi) if ev.reads else None
            if key is None or key != self.last_stationary:
                ls = load_stationary_cycles(ev, self.hw) / self.clock
                hidden = self.last_nominal if abs(s - self.last_end) < 1e-6 else 0.0
                extra = max(0.0, ls - hidden)
                nominal += extra
                self.exposed_ls_ns += extra
            self.last_stationary = key
        dur = nominal / self.speed(s)
        self.throttled_ns += dur - nominal
        self._add_busy(s, s + dur)
        self.last_end = s + dur
        self.last_nominal = nominal
        return dur


def _dependents(deps: list, n: int) -> list[list[int]]:
    """dependents[d] = the events that wait for event d, in order."""
    out: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for d in ds:
            out[d].append(i)
    return out


class Scheduler:
    """List scheduler over one trace.  ``run()`` drives the steps:

    1. release — an instruction whose dependencies are all done gets its ready time and joins its
       engine's candidates (DMAs join the DMA ready queue);
    2. dispatch — a free compute engine starts the first ready instruction within its window (or
       sleeps until the earliest one becomes ready);
    3. DMA issue — ready DMAs (list-scheduled in program order within the window) go through the
       issue queues onto the DMA engines;
    4. finish — a finished instruction releases its dependents.

    ``facts``: the events' :class:`TraceFacts` when the caller has them (shared across the schedules
    of one estimate); with the trace's loop programs in them (``TraceFacts.runs``) both passes write the
    iterations of a repeating state instead of simulating them (perf/steady.py; ``Schedule.steady`` says
    what they wrote)."""

    def __init__(
        self,
        events: Sequence[Event],
        hw: HardwareSpec,
        opts: ModelOptions,
        deps: list,
        extra_elided: dict | None = None,
        facts: TraceFacts | None = None,
    ) -> None:
        f = self.facts = _facts(events, facts)
        self.events = events
        self.hw = hw
        self.opts = opts
        self.deps = deps
        n = len(events)
        self.n = n
        held, dependents = f.get(("dependents", id(deps)), lambda: (deps, _dependents(deps, n)))
        if held is not deps:  # (an id reused by another list)
            dependents = _dependents(deps, n)
        self.dependents = dependents  # (read only: shared by the schedules of one dependency list)
        self.remaining = [len(d) for d in deps]
        self.elided = elisions(events, opts, hw, f)
        self.elided.update(extra_elided or {})
        if opts.place_engines:

            def place():
                return hw, place_engines(
                    events, lambda ev, e: compute_cost_ns(ev, hw, e)[0], _compute_cost_key, f.engine
                )

            held, placed = f.get(("place_engines", id(hw)), place)
            if held is not hw:  # (an id reused by another spec)
                placed = place()[1]
            self.engine_of = list(placed)
        else:
            self.engine_of = list(f.engine)
        self.window = 1 if opts.serialise else opts.window
        self.uncosted: dict = {}
        self.reordered = 0
        # hops
        self.sem = hw.v("sem_ns")
        self.bubble_ns = {
            e: hw.v("dep_bubble_cycles") / hw.v(k)
            for e, k in (("ACT", "act_clock_ghz"), ("DVE", "dve_clock_ghz"), ("POOL", "pool_clock_ghz"))
        }
        self.pe_result_ns = hw.v("pe_result_latency_cycles") / hw.v("pe_clock_ghz")
        # compute engines: program-order queues
        self.queues: dict[str, list[int]] = {e: [] for e in COMPUTE_ENGINES}
        elided = self.elided
        engine_of = self.engine_of
        is_dma = f.is_dma
        for i in range(n):
            if not is_dma[i] and i not in elided:
                self.queues.setdefault(engine_of[i], []).append(i)
        self.pe = _TensorEngineState(hw)
        # DMA front end
        self.dma_mode = opts.dma_mode(hw)
        self.n_issue = opts.issue_queues(hw)
        # the part of a DGE instruction's execution time that is not queue occupancy is latency
        self.issue_latency = max(0.0, hw.v("dge_exec_ns") - hw.v("dge_issue_ns")) if self.dma_mode == "hwdge" else 0.0
        self.L = hw.v("dma_latency_ns")
        self.n_rings = int(hw.v("dma_rings"))
        self.per_ring = int(hw.v("dma_partitions_per_ring"))
        self.max_inflight = int(hw.v("dma_max_inflight"))
        self.dma_queue = [i for i in range(n) if is_dma[i] and i not in elided]  # program order
        self.dma_t: dict = {}

    def _serial(self) -> list:
        """serial_dma of every event (False for compute instructions)."""
        o = self.opts
        if o.middle_end or o.frontend == "nki07" or o.skip_issue == "parallel":
            return [False] * self.n
        if o.skip_issue == "serial":
            return list(self.facts.is_dma)
        kinds = self.facts.get("loop_kinds", lambda: [_loop_kind(ev) for ev in self.events])
        return [d and k == "affine" for d, k in zip(self.facts.is_dma, kinds, strict=True)]

    def _cost_keys(self) -> list:
        """The cost memo's key of each event, filled as events are costed (None: not yet): an id of its
        cost signature (op, shape, dtypes, bytes, payload, PSUM side); with the engine it runs on it
        selects one cost (the memo of the scheduler)."""
        return self.facts.get("cost_keys", lambda: [None] * self.n)

    def _dma_issuer(self, issue_free: list, slots: list, ring_free: list) -> Callable:
        """``issue(cost, ready, queue, event) -> DmaTiming``: one DMA through DGE queue ``queue`` (free times
        ``issue_free``), the first free of the in-flight slots (a heap of (free at, slot)) and the DMA engines
        (rings) its partitions map to (free times ``ring_free``); updates the three.  The one DMA front end of
        :meth:`run` and :meth:`run_in_order`."""
        issue_latency, L = self.issue_latency, self.L
        n_rings, per_ring = self.n_rings, self.per_ring
        pop, push, inf = heapq.heappop, heapq.heappush, math.inf

        def issue(c: DmaCost, r: float, k: int, ev: Event) -> DmaTiming:
            sf, q = pop(slots)
            s = max(issue_free[k], r, sf)
            ie = s + c.issue_ns
            issue_free[k] = ie
            arrive = ie + issue_latency + L
            # partition p is served by DMA engine p // 8 (DO: a 4-partition DMA used one engine);
            # the start partition comes from the DMA payload's partition_start
            payload: Any = ev.payload
            first = int(payload.partition_start or 0) // per_ring
            ring_ns = c.ring_ns
            used = min(c.rings, n_rings)
            if used == 1:  # (the loop below with one engine: min(inf, st) is st, max(0.0, end) is end)
                x = first % n_rings
                ds = st = max(ring_free[x], arrive)
                ring_free[x] = de = st + ring_ns
            else:
                ds, de = inf, 0.0
                for x in ((first + y) % n_rings for y in range(used)):
                    st = max(ring_free[x], arrive)
                    ring_free[x] = st + ring_ns
                    ds = min(ds, st)
                    de = max(de, st + ring_ns)
            push(slots, (de, q))
            return DmaTiming(r, s, ie, ds, de, q, c, k)

        return issue

    def run(self) -> Schedule:
        """The discrete-event simulation: the schedule of every instruction."""
        out = self._run(keep=True)
        assert isinstance(out, Schedule)
        return out

    def makespan_ns(self) -> float:
        """The makespan alone, as :meth:`run` (or with ``serialise`` :meth:`run_in_order`) finds it: what the
        estimate reads of an alternative schedule (model.alternatives).  The same simulation, but the cycles a
        steady state writes get only what the rest of the pass reads (their ends; perf/steady.py), not every
        instruction's start and DMA record."""
        out = self._run_in_order(keep=False) if self.opts.serialise else self._run(keep=False)
        assert isinstance(out, float)
        return out

    def _run(self, keep: bool) -> Schedule | float:
        """run() (``keep``) or makespan_ns(): one function, its state in local variables."""
        n = self.n
        hw = self.hw
        events = self.events
        engine_of = self.engine_of
        elided = self.elided
        is_el = [False] * n
        folded = [False] * n  # a folded fill signals nothing
        for i, o in elided.items():
            is_el[i] = True
            if o < 0:
                folded[i] = True
        rec_dma = self.facts.is_dma
        dependents = self.dependents
        remaining = self.remaining
        window = self.window
        start = [0.0] * n
        end = [0.0] * n
        ready = [0.0] * n
        started = [False] * n
        heap: list = []
        cnt = itertools.count(1)
        push = heapq.heappush
        pop = heapq.heappop
        inf = math.inf
        # hops
        sem, pe_res, bubble = self.sem, self.pe_result_ns, self.bubble_ns
        hop_of: dict = {}
        for ei in set(engine_of):
            for ej in set(engine_of):
                if ej == "DMA":
                    hop_of[ei, ej] = 0.0
                elif ei != ej:
                    hop_of[ei, ej] = sem + (pe_res if ei == "PE" else 0.0)
                else:
                    hop_of[ei, ej] = bubble.get(ej, 0.0)  # PE accumulation chains have no bubble
        # costs
        cost_keys = self._cost_keys()
        cost_key = self._cost_key
        cost_memo: dict = {}
        dma_mode = self.dma_mode

        def cost(i):
            ck = cost_keys[i]
            if ck is None:
                ck = cost_key(i)
            key = (ck, engine_of[i])
            hit = cost_memo.get(key)
            if hit is None:
                eng = engine_of[i]
                ev = events[i]
                hit = cost_memo[key] = dma_cost(ev, hw, dma_mode) if eng == "DMA" else compute_cost_ns(ev, hw, eng)
            return hit

        # compute engines
        queues = self.queues
        qpos = {e: 0 for e in queues}
        busy = {e: False for e in queues}
        eng_free = {e: 0.0 for e in queues}
        wake_at = {e: inf for e in queues}
        n_released = {e: 0 for e in queues}  # released, not started (fast exit)
        pe = self.pe
        uncosted = self.uncosted
        reordered = 0

        def dispatch(e, now):
            nonlocal reordered
            if busy[e] or not n_released[e]:
                return
            q = queues[e]
            nq = len(q)
            p = qpos[e]
            while p < nq and started[q[p]]:
                p += 1
            qpos[e] = p
            best = -1
            earliest = inf
            seen = 0
            k = p
            while k < nq and seen < window:
                i = q[k]
                k += 1
                if started[i]:
                    continue
                seen += 1
                if remaining[i]:
                    continue
                r = ready[i]
                if r <= now:
                    best = i
                    break
                if r < earliest:
                    earliest = r
            if best < 0:
                if earliest < wake_at[e]:
                    wake_at[e] = earliest
                    push(heap, (earliest, next(cnt), _WAKE, e))
                return
            if best != q[p]:
                reordered += 1
            s = max(eng_free[e], ready[best], now)
            dur, known = cost(best)
            if not known:
                op = events[best].op
                uncosted[op] = uncosted.get(op, 0) + 1
            if e == "PE":
                dur = pe.duration(events[best], s, dur)
            start[best] = s
            end[best] = fin = s + dur
            started[best] = True
            n_released[e] -= 1
            busy[e] = True
            eng_free[e] = fin
            push(heap, (fin, next(cnt), _DONE, best))

        # DMA front end
        dma_queue = self.dma_queue
        n_dq = len(dma_queue)
        dma_qpos = [-1] * n
        for k, i in enumerate(dma_queue):
            dma_qpos[i] = k
        dma_ready: list = []  # positions of released DMAs
        issued = [False] * n_dq
        p0 = 0  # first DMA of the queue not yet issued
        ahead: list = []  # sorted positions > p0 already issued
        n_issue = self.n_issue
        issue_free = [0.0] * n_issue
        max_inflight = self.max_inflight
        slots = [(0.0, q) for q in range(max_inflight)]  # (free at, slot): heap order = first free slot
        serial = self._serial()
        ring_free = [0.0] * self.n_rings
        dma_t = self.dma_t
        issue_busy = 0.0
        inflight = 0
        dma_released = 0
        issue = self._dma_issuer(issue_free, slots, ring_free)
        records = dma_t if keep else None  # what the steady state's cycles write besides the ends

        def issue_dmas():
            nonlocal p0, issue_busy, inflight, dma_released
            while dma_released and inflight < max_inflight:
                # list-scheduled like an engine: the first released DMA (program order) among the next
                # ``window`` DMAs not yet issued
                if not dma_ready:  # (a position joins once, when its DMA is released, and leaves when issued)
                    return
                pos = dma_ready[0]
                if pos - p0 >= window and pos - p0 - bisect_left(ahead, pos) >= window:
                    return  # outside the window
                pop(dma_ready)
                issued[pos] = True
                if pos == p0:
                    p0 += 1
                    while p0 < n_dq and issued[p0]:
                        p0 += 1
                    if ahead:
                        del ahead[: bisect_left(ahead, p0)]
                else:
                    insort(ahead, pos)
                j = dma_queue[pos]
                dma_released -= 1
                r = ready[j]
                ck = cost_keys[j]
                c = cost_memo.get((ck, "DMA")) if ck is not None else None
                if c is None:
                    c = cost(j)
                k = 0 if serial[j] or n_issue == 1 else issue_free.index(min(issue_free))  # the first free queue
                d = dma_t[j] = issue(c, r, k, events[j])
                issue_busy += c.issue_ns
                start[j] = d.issue_start
                end[j] = de = d.data_end
                started[j] = True
                inflight += 1
                push(heap, (de, next(cnt), _DONE, j))

        def release(j, touched):
            nonlocal dma_released, done
            if is_el[j]:  # hoisted repeat: done when its original is
                start[j] = end[j] = ready[j]
                started[j] = True
                if dependents[j]:
                    push(heap, (ready[j], next(cnt), _DONE, j))
                else:  # its DONE would change nothing: no engine, no dependent, and the DMA issue
                    done += 1  # loop already stopped where it stands (the merged loops' repeats)
            elif engine_of[j] == "DMA":
                dma_released += 1
                push(dma_ready, dma_qpos[j])
            else:
                e = engine_of[j]
                n_released[e] += 1
                touched.add(e)

        touched: set[str] = set()  # engines whose queue may dispatch now
        done = 0
        for i in range(n):
            if remaining[i] == 0:
                release(i, touched)
        for e in queues:
            dispatch(e, 0.0)
        issue_dmas()

        # ---- the steady state of a loop program (perf/steady.py): the iterations' state repeating, moved ahead
        segs, self.steady_why = (
            segments(self.facts.runs, events, self.deps, dependents, elided, engine_of, self.facts.memo)
            if self.facts.runs
            else ([], "")
        )
        self.skipped = 0  # events whose times the steady state wrote
        self.steady_done: list = []  # (line, events written, events of the loop, cycle)
        seg_at = 0
        tries = FIRST_TRY  # iteration of the next first snapshot in the current loop
        gap = FIRST_TRY  # how much further the try after a failed one starts (grows fourfold)
        seen: dict = {}  # the exact part of a snapshot -> the snapshots of this try with it
        cut_ev = -1  # the event whose end (its DONE) is the next snapshot
        lo_hint = 0
        nodep: dict = {}  # engine -> its instructions without dependencies (released from the start), in order

        def beyond(e, x):
            """Instructions of engine e at or after event x released from the start (untouched state)."""
            lst = nodep.get(e)
            if lst is None:
                lst = nodep[e] = [k for k in queues[e] if not self.deps[k]]
            return len(lst) - bisect_left(lst, x)

        def arm():
            nonlocal seg_at, tries, gap, cut_ev
            seen.clear()
            while seg_at < len(segs):
                g = segs[seg_at]
                if tries + 2 * MAX_CYCLE < (g.end - g.first) // g.per:
                    cut_ev = g.first + tries * g.per + g.ref
                    return
                seg_at += 1
                tries = gap = FIRST_TRY
            cut_ev = -1

        def snapshot(t, i_cur, j):
            """The scheduler's state at the end of iteration j's reference instruction, normalised: event
            indices and DMA queue positions from iteration j's, times from t.  ``ex`` compares exactly, ``fl``
            to within the tolerance.  None: the state reaches outside the loop."""
            nonlocal lo_hint
            g = segs[seg_at]
            B = g.first + j * g.per
            Bd = bisect_left(dma_queue, B)
            hidx = [x for _, _, kd, x in heap if kd == _DONE]
            hidx.append(i_cur)
            hset = set(hidx)
            try:
                lo = started.index(False, lo_hint)
            except ValueError:
                lo = n
            lo = lo_hint = min(lo, min(hidx))
            top = max(hidx)
            for e, q in queues.items():  # started instructions lie within the dispatch window of the queue
                p, nq, seen = qpos[e], len(q), 0
                while p < nq and seen < window:
                    x = q[p]
                    p += 1
                    if not started[x]:
                        seen += 1
                    elif x > top:
                        top = x
            if ahead:
                top = max(top, dma_queue[ahead[-1]])
            if p0 > 0:
                top = max(top, dma_queue[p0 - 1])
            if lo < g.first or top >= g.end:
                return None
            hi = max(top, g.reach[top - g.first]) + 1  # and the dependents the finished ones touched
            ex: Any = [lo - B, hi - B]
            fl: list = []
            for x in range(lo, hi):
                if started[x]:
                    if x in hset:  # running: when it ends matters
                        ex.append(1)
                        fl.append(start[x] - t)
                        fl.append(end[x] - t)
                    else:
                        ex.append(2)
                else:  # waiting: for how many, since when (0.0: untouched or without dependencies)
                    r = ready[x]
                    ex.append((remaining[x], r == 0.0))
                    if r != 0.0:
                        fl.append(r - t)
            for ht, _, kd, x in sorted(heap):
                ex.append((kd, x - B if kd == _DONE else x))
                fl.append(ht - t)
            for e, q in queues.items():
                p = qpos[e]
                ex.append((q[p] - B if p < len(q) else None, busy[e], n_released[e] - beyond(e, hi)))
                fl.append(max(eng_free[e], t) - t)  # (an engine starts nothing before now)
                w = wake_at[e]
                if w == inf:
                    ex.append(None)
                else:
                    fl.append(w - t)
            hp, lp = bisect_left(dma_queue, hi), bisect_left(dma_queue, lo)
            ex.append(tuple(sorted(p - Bd for p in dma_ready if p < hp)))
            ex.append((p0 - Bd, tuple(p - Bd for p in ahead), inflight, tuple(issued[lp:hp])))
            # a DMA issues no earlier than the first free slot: queue and engine times before it compare as it
            # (the order of the queues still decides which one the next DMA takes)
            floor = slots[0][0]
            ex.append(tuple(sorted(range(n_issue), key=lambda k: (issue_free[k], k))))
            fl.extend(max(v, floor) - t for v in issue_free)
            fl.extend(max(v, floor) - t for v in ring_free)
            for v, q in sorted(slots):
                ex.append(q)
                fl.append(v - t)
            return (j, t, Bd, lo, hi, tuple(ex), fl, started[lo:hi], issue_busy, reordered, done, dict(uncosted))

        def advance(s0, s1):
            """Move the state of s1 (now) ahead by as many whole cycles s0 -> s1 as the loop has left, writing the
            skipped instructions' times from the cycle just run; (time, event) of the cut then, or None."""
            nonlocal p0, issue_busy, dma_released, reordered, done, lo_hint
            g = segs[seg_at]
            j0, t0, Bd0, lo0, hi0, _, _, st0, ib0, ro0, dn0, un0 = s0
            j1, t1, Bd1, lo1, hi1, _, _, _, ib1, ro1, dn1, un1 = s1
            Qe, Qd, D1 = (j1 - j0) * g.per, Bd1 - Bd0, t1 - t0
            look = g.lookahead(lo1, Qe, window)  # how far ahead of its state the scheduler reads
            m = (g.repeats_until(Qe, lo0 + Qe) - look - hi1) // Qe  # (the input repeats up to there)
            if m < 2:
                return None
            ran = [x for x in range(lo0, hi1) if started[x] and not (x < hi0 and st0[x - lo0])]
            if any(engine_of[x] == "PE" for x in ran):  # (TensorE's throttle windows are absolute)
                return None
            sigma, sd, D = m * Qe, m * Qd, m * D1
            w_st, w_rem, w_rd = started[lo1:hi1], remaining[lo1:hi1], ready[lo1:hi1]
            lp, hp = bisect_left(dma_queue, lo1), bisect_left(dma_queue, hi1)
            w_iss = issued[lp:hp]
            # the instructions the cycles run, each cycle the last one moved
            self._fill(ran, Qe, D1, m, start, end, records, (started, remaining, issued, dma_qpos))
            self.steady_done.append((g.line, m * len(ran), g.end - g.first, j1 - j0))
            self.skipped += m * len(ran)
            for k in range(hi1 - lo1):  # the waiting ones, moved (the running ones' times are written above)
                if not w_st[k]:
                    y = lo1 + k + sigma
                    started[y] = False
                    remaining[y] = w_rem[k]
                    ready[y] = w_rd[k] + D if w_rd[k] != 0.0 else 0.0
            heap[:] = [(ht + D, c, kd, x + sigma if kd == _DONE else x) for ht, c, kd, x in heap]
            heapq.heapify(heap)
            for e, q in queues.items():
                if qpos[e] < len(q):
                    qpos[e] = bisect_left(q, q[qpos[e]] + sigma)
                eng_free[e] += D
                if wake_at[e] != inf:
                    wake_at[e] += D
                n_released[e] += beyond(e, hi1 + sigma) - beyond(e, hi1)
            dma_ready[:] = [p + sd for p in dma_ready if p < hp] + [p for p in dma_ready if p >= hp + sd]
            heapq.heapify(dma_ready)
            dma_released = len(dma_ready)
            issued[lp + sd : hp + sd] = w_iss
            p0 += sd
            ahead[:] = [x + sd for x in ahead]
            issue_free[:] = [v + D for v in issue_free]
            ring_free[:] = [v + D for v in ring_free]
            slots[:] = [(v + D, q) for v, q in slots]
            issue_busy += m * (ib1 - ib0)
            reordered += m * (ro1 - ro0)
            done += m * (dn1 - dn0)
            for op, c in un1.items():
                if c != un0.get(op, 0):
                    uncosted[op] = uncosted.get(op, 0) + m * (c - un0.get(op, 0))
            lo_hint = lo1 + sigma
            return t1 + D, cut_ev + sigma

        def cut(t, i):
            """At the end of a reference instruction: snapshot, compare with the earlier ones of this try (the
            latest first: the shortest cycle), advance on a repeat."""
            nonlocal cut_ev, tries, gap
            g = segs[seg_at]
            j = (i - g.first - g.ref) // g.per
            s = snapshot(t, i, j)
            if s is not None:
                key = s[5]
                for s0 in reversed(seen.get(key, ())):
                    if (j - s0[0]) % g.period == 0 and same(s[6], s0[6], t):
                        moved = advance(s0, s)
                        if moved is not None:  # on from the iteration it moved to (the input may repeat again)
                            tries = (moved[1] - g.first - g.ref) // g.per + 1
                            gap = FIRST_TRY
                            arm()
                            return moved
                seen.setdefault(key, []).append(s)
            if s is None or j - tries >= MAX_CYCLE:  # no steady state from here: try again further in
                tries += gap + MAX_CYCLE
                gap *= 4
                arm()
                return t, i
            cut_ev = i + g.per
            return t, i

        arm()
        while heap:
            t, _, kind, i = pop(heap)
            if i == cut_ev:
                t, i = cut(t, i)
            touched = set()
            if kind == _DONE:
                done += 1
                ei = engine_of[i]
                if rec_dma[i]:
                    if not is_el[i]:
                        inflight -= 1
                elif not is_el[i]:
                    busy[ei] = False
                    touched.add(ei)
                end_i = end[i]
                fold_i = folded[i]
                for j in dependents[i]:
                    if is_el[j] or fold_i:
                        v = end_i + 0.0
                    else:
                        v = end_i + hop_of[ei, engine_of[j]]
                    if v > ready[j]:
                        ready[j] = v
                    remaining[j] -= 1
                    if remaining[j] == 0:
                        release(j, touched)
            else:
                if wake_at[i] == t:
                    wake_at[i] = inf
                touched.add(i)
            for eng in touched:
                if not busy[eng] and n_released[eng]:
                    dispatch(eng, t)
            if dma_released and inflight < max_inflight:
                issue_dmas()
        self.reordered = reordered
        self.issue_busy = issue_busy
        if done != n:
            stuck = [i for i in range(n) if not started[i]][:5]
            raise RuntimeError(
                f"cost model scheduler stalled with {n - done} instructions "
                f"left (first: {stuck}; dependency cycle in the trace?)"
            )
        if not keep:
            return max(end) if n else 0.0
        busy_ns = {e: 0.0 for e in COMPUTE_ENGINES}
        for e, q in queues.items():
            busy_ns[e] = busy_ns.get(e, 0.0) + sum(end[i] - start[i] for i in q)
        busy_ns["DMA"] = _union_length(dma_t.values())
        makespan = max(end) if n else 0.0
        return Schedule(
            start,
            end,
            list(engine_of),
            dma_t,
            self.deps,
            busy_ns,
            issue_busy,
            makespan,
            uncosted,
            pe.throttled_ns,
            pe.exposed_ls_ns,
            dict(elided),
            reordered,
            note(self.steady_done, self.steady_why),
        )

    def _fill(
        self, ran: list, Qe: int, D1: float, m: int, start: list, end: list, dmas: dict | None, flags: tuple | None
    ) -> None:
        """The instructions ``ran`` (one cycle of a steady state, perf/steady.py; ascending) moved by 1..m cycles of
        ``Qe`` events and ``D1`` ns: their ends written (a contiguous cycle by slice), their starts too with
        ``dmas`` (the DMA records), which get theirs; without it (a makespan alone) only the last
        cycle's starts, the ones of the instructions still running, which the pass reads on.  ``flags``: run()'s
        started / remaining / issued / DMA positions to mark, or None.  (Ready times are not written: a started
        instruction's is never read again.)"""
        deps = self.deps
        x0, L = ran[0], len(ran)
        whole = ran[-1] - x0 + 1 == L == Qe  # one contiguous cycle: the m cycles after it are one slice
        # (a slice assignment past the end would grow the list, where an index raises)
        assert not whole or x0 + (m + 1) * Qe <= len(end), "steady state: cycles written past the trace"
        a = np.arange(1, m + 1, dtype=np.int64)[:, None]
        dt = a * D1
        ys: Any = (
            range(x0 + Qe, x0 + (m + 1) * Qe) if whole else (np.array(ran, np.int64)[None, :] + a * Qe).ravel().tolist()
        )
        for arr, last_only in ((end, False), (start, dmas is None)):
            base = np.array([arr[k] for k in ran])
            if last_only:
                deque(map(arr.__setitem__, [k + m * Qe for k in ran], (base + m * D1).tolist()), maxlen=0)
            elif whole:
                arr[x0 + Qe : x0 + (m + 1) * Qe] = (base + dt).ravel().tolist()
            else:
                deque(map(arr.__setitem__, ys, (base + dt).ravel().tolist()), maxlen=0)
        if flags is not None:
            started, remaining, issued, dma_qpos = flags
            if whole:
                started[x0 + Qe : x0 + (m + 1) * Qe] = repeat(True, m * Qe)
                remaining[x0 + Qe : x0 + (m + 1) * Qe] = repeat(0, m * Qe)
            else:
                deque(map(started.__setitem__, ys, repeat(True)), maxlen=0)
                deque(map(remaining.__setitem__, ys, repeat(0)), maxlen=0)
        dma_t = self.dma_t
        for x in (k for k in ran if k in dma_t):
            cys = range(x + Qe, x + (m + 1) * Qe, Qe)
            if flags is not None:
                deque(map(issued.__setitem__, map(dma_qpos.__getitem__, cys), repeat(True)), maxlen=0)
            if dmas is None:
                continue
            d = dma_t[x]
            shifted = [np.arange(1, m + 1) * D1 + v for v in d[:5]]  # ready, issue, data start / end
            if not deps[x]:
                shifted[0] = np.zeros(m)  # (no dependency: ready from the start)
            recs = list(
                map(
                    _new_tuple,
                    repeat(DmaTiming),
                    zip(*(v.tolist() for v in shifted), repeat(d.queue), repeat(d.cost), repeat(d.dge)),
                )
            )
            dmas.update(zip(cys, recs, strict=True))

    def run_in_order(self) -> Schedule:
        """:meth:`_run_in_order`: the schedule of every instruction."""
        out = self._run_in_order(keep=True)
        assert isinstance(out, Schedule)
        return out

    def _run_in_order(self, keep: bool) -> Schedule | float:
        """The schedule :meth:`run` makes when the window is 1 (``serialise``), without the event
        queue: with one candidate per queue every engine runs its instructions in program order and
        starts each at max(engine free, ready) (run dispatches at the time of the event that makes it
        possible: the engine's previous instruction ending, the instruction's last dependency ending
        with no hop, or the wake-up at its ready time), and the DMAs issue in program order with a
        start that does not depend on when they issue (max of the queue's, the slot's and the DMA's
        own ready time) -- so one pass in program order gives the same floats.  Ready times are the
        maximum over the dependencies, which does not depend on the order they finish in.  Only the
        order of first appearance of ``uncosted_ops`` may differ (program order here, start order
        in :meth:`run`)."""
        if self.window != 1:
            raise ValueError("Scheduler.run_in_order: only for a window of 1 (ModelOptions.serialise or window=1)")
        n = self.n
        hw = self.hw
        events = self.events
        engine_of = self.engine_of
        elided = self.elided
        deps = self.deps
        is_el = [False] * n
        folded = [False] * n
        for i, o in elided.items():
            is_el[i] = True
            if o < 0:
                folded[i] = True
        sem, pe_res, bubble = self.sem, self.pe_result_ns, self.bubble_ns
        engines = set(engine_of)
        hop_of = {
            (ei, ej): 0.0
            if ej == "DMA"
            else (sem + (pe_res if ei == "PE" else 0.0))
            if ei != ej
            else bubble.get(ej, 0.0)
            for ei in engines
            for ej in engines
        }
        start = [0.0] * n
        end = [0.0] * n
        cost_memo: dict = {}
        dma_mode = self.dma_mode
        queues = self.queues
        eng_free = {e: 0.0 for e in queues}
        pe = self.pe
        uncosted = self.uncosted
        n_issue = self.n_issue
        issue_free = [0.0] * n_issue
        slots = [(0.0, q) for q in range(self.max_inflight)]
        serial = self._serial()
        ring_free = [0.0] * self.n_rings
        dma_t = self.dma_t
        issue_busy = 0.0
        issue = self._dma_issuer(issue_free, slots, ring_free)
        records = dma_t if keep else None
        cost_keys = self._cost_keys()
        cost_key = self._cost_key
        # the steady state of a loop program (perf/steady.py): at iteration boundaries, the state the rest of the
        # pass reads (engine / queue / slot / ring free times, the ends the next dependencies read), normalised
        segs, self.steady_why = (
            segments(self.facts.runs, events, deps, self.dependents, elided, engine_of, self.facts.memo)
            if self.facts.runs
            else ([], "")
        )
        self.skipped = 0
        self.steady_done = []
        is_dma = self.facts.is_dma
        order = sorted(eng_free)
        plan = {"seg": 0, "tries": FIRST_TRY, "j": FIRST_TRY, "gap": FIRST_TRY}
        snaps: list = []

        def next_stop(pos):
            """The event index of the next iteration boundary to check (n: none)."""
            while plan["seg"] < len(segs):
                g = segs[plan["seg"]]
                trips = (g.end - g.first) // g.per
                j = max(plan["j"], -(-(pos - g.first) // g.per))
                if j - plan["tries"] <= MAX_CYCLE and j < trips:
                    plan["j"] = j
                    return g.first + j * g.per
                snaps.clear()
                plan["tries"] += plan["gap"] + MAX_CYCLE  # no steady state from there: try again further in
                plan["gap"] *= 4
                plan["j"] = plan["tries"]
                if plan["tries"] + 1 >= trips:
                    plan["seg"] += 1
                    plan["tries"] = plan["j"] = plan["gap"] = FIRST_TRY
            return n

        def check(i):
            """Snapshot at boundary i; on a repeat, write the remaining cycles and return where to go on."""
            g = segs[plan["seg"]]
            j = plan["j"]
            plan["j"] = j + 1
            lo = i - g.dmax
            if lo < g.first or i < 1:
                return i, 0.0
            T = end[i - 1]
            ends = [end[x] - T for x in range(lo, i)]
            sl = sorted(slots)
            raw = ([eng_free[e] for e in order], list(issue_free), list(ring_free))
            s1 = (j, T, ends, raw, tuple(q for _, q in sl), [v - T for v, _ in sl], issue_busy, dict(uncosted))
            for s0 in reversed(snaps):
                if (j - s0[0]) % g.period or s0[4] != s1[4] or not same(s0[2], ends, T) or not same(s0[5], s1[5], T):
                    continue
                # engines, rings (and queues of serial DMAs) the cycle did not use keep their time: the input
                # repeats, so no later cycle uses them either; the others moved as the state did
                strict = (False, not serial_only(g), False)
                if not all(
                    (x0 == x1 and not st) or abs((x1 - T) - (x0 - s0[1])) <= TOLERANCE * abs(T) + 1e-3
                    for a0, a1, st in zip(s0[3], raw, strict, strict=True)
                    for x0, x1 in zip(a0, a1, strict=True)
                ):
                    continue
                B0, B1 = g.first + s0[0] * g.per, i
                Qe, D1 = B1 - B0, T - s0[1]
                m = (g.repeats_until(Qe, B1) - B1) // Qe  # (the input repeats up to there)
                if m < 1 or any(engine_of[x] == "PE" for x in range(B0, B1)):
                    continue
                self._fill(list(range(B0, B1)), Qe, D1, m, start, end, records, None)
                self.steady_done.append((g.line, m * Qe, g.end - g.first, j - s0[0]))
                D = m * D1
                for e in order:
                    eng_free[e] += D
                issue_free[:] = [v + D for v in issue_free]
                ring_free[:] = [v + D for v in ring_free]
                slots[:] = [(v + D, q) for v, q in slots]
                for op, c in s1[7].items():
                    if c != s0[7].get(op, 0):
                        uncosted[op] = uncosted.get(op, 0) + m * (c - s0[7].get(op, 0))
                self.skipped += m * Qe
                snaps.clear()  # on from the iteration it moves to (the input may repeat again after)
                plan["tries"] = plan["j"] = j + m * (j - s0[0]) + 1
                plan["gap"] = FIRST_TRY
                return B1 + m * Qe, m * (issue_busy - s0[6])
            snaps.append(s1)
            return i, 0.0

        serial_memo: dict = {}

        def serial_only(g):
            """Every DMA of the loop issues on queue 0 (serial, or one queue): the others' times do not matter."""
            hit = serial_memo.get(g.first)
            if hit is None:
                hit = serial_memo[g.first] = n_issue == 1 or all(
                    s or not d for d, s in zip(is_dma[g.first : g.end], serial[g.first : g.end], strict=True)
                )
            return hit

        pos = 0
        while pos < n:
            stop = next_stop(pos)
            for i in range(pos, stop):
                r = 0.0
                ds = deps[i]
                if ds:
                    ei = engine_of[i]
                    zero = is_el[i]
                    for d in ds:
                        v = end[d] + (0.0 if zero or folded[d] else hop_of[engine_of[d], ei])
                        if v > r:
                            r = v
                if is_el[i]:  # hoisted repeat: done when its original is
                    start[i] = end[i] = r
                    continue
                e = engine_of[i]
                ck = cost_keys[i]
                if ck is None:
                    ck = cost_key(i)
                if e == "DMA":
                    c = cost_memo.get((ck, e))
                    if c is None:
                        c = cost_memo[ck, e] = dma_cost(events[i], hw, dma_mode)
                    k = 0 if serial[i] or n_issue == 1 else issue_free.index(min(issue_free))
                    dt_ = dma_t[i] = issue(c, r, k, events[i])
                    issue_busy += c.issue_ns
                    start[i] = dt_.issue_start
                    end[i] = dt_.data_end
                    continue
                s = max(eng_free[e], r)
                hit = cost_memo.get((ck, e))
                if hit is None:
                    hit = cost_memo[ck, e] = compute_cost_ns(events[i], hw, e)
                dur, known = hit
                if not known:
                    op = events[i].op
                    uncosted[op] = uncosted.get(op, 0) + 1
                if e == "PE":
                    dur = pe.duration(events[i], s, dur)
                start[i] = s
                end[i] = eng_free[e] = s + dur

            pos = stop
            if pos < n:
                pos, busy_add = check(pos)
                issue_busy += busy_add
        self.issue_busy = issue_busy
        if not keep:
            return max(end) if n else 0.0
        busy_ns = {e: 0.0 for e in COMPUTE_ENGINES}
        for e, eq in queues.items():
            busy_ns[e] = busy_ns.get(e, 0.0) + sum(end[i] - start[i] for i in eq)
        busy_ns["DMA"] = _union_length(dma_t.values())
        return Schedule(
            start,
            end,
            list(engine_of),
            dma_t,
            deps,
            busy_ns,
            issue_busy,
            max(end) if n else 0.0,
            uncosted,
            pe.throttled_ns,
            pe.exposed_ls_ns,
            dict(elided),
            0,
            note(self.steady_done, self.steady_why),
        )

    def _cost_key(self, i: int) -> int:
        """The id of event i's cost signature (see :meth:`_cost_keys`)."""
        keys = self._cost_keys()
        ck = keys[i]
        if ck is None:
            ev = self.events[i]
            sig_ids = self.facts.get("cost_sig_ids", dict)
            psum = any(r.buffer == "psum" for r in ev.reads) or any(r.buffer == "psum" for r in ev.writes)
            p = ev.payload
            sig = (ev.op, ev.partitions, ev.free_elems, ev.in_dtypes, ev.out_dtype, ev.bytes, type(p), *(p or ()), psum)
            ck = sig_ids.get(sig)
            if ck is None:
                ck = sig_ids[sig] = len(sig_ids)
            keys[i] = ck
        return ck


def schedule(
    events: Sequence[Event],
    hw: HardwareSpec,
    opts: ModelOptions | None = None,
    alloc_origins: dict | None = None,
    deps: list | None = None,
    alloc_names: dict | None = None,
    peak_sbuf: int = 0,
    extra_elided: dict | None = None,
    placed: frozenset | set = frozenset(),
    facts: TraceFacts | None = None,
) -> Schedule:
    """Schedule ``events``; ``deps`` (from :func:`build_dependencies` with the same options)
    may be passed in to reuse it across hardware variants; ``extra_elided``: more instructions the
    compiler removes ({index: index of the instruction that stands for it}, compiler.vectorised);
    ``facts``: the events' :class:`TraceFacts` when the caller has them."""
    opts = opts or ModelOptions()
    with no_gc():
        facts = _facts(events, facts)
        if deps is None:
            deps = build_dependencies(events, opts, alloc_origins, alloc_names, hw, peak_sbuf, placed, facts)
        return Scheduler(events, hw, opts, deps, extra_elided, facts).run()
