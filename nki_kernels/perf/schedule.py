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
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from nki_kernels.sim.core.trace import Event, Matmul

from .compiler import allocation, place_engines, psum_zero_folds, redundant_loads
from .costs import DmaCost, compute_cost_ns, dma_cost, load_stationary_cycles, pe_instructions
from .hardware import HardwareSpec, get_hardware

MODES = ("benchmark", "profile")
SKIP_ISSUE = ("serial", "by-loop", "parallel")
FRONTENDS = ("nki01", "nki07")
ONCHIP = ("sbuf", "psum")
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


@dataclass
class DmaTiming:
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
        if not self.segs:
            return
        if track_readers:
            self._split(lo)
            self._split(hi)
        i, j = self._range(lo, hi)
        for k in range(i, j):
            s = self.segs[k]
            if s[2] is not None:
                deps.add(s[2])
            if track_readers:
                s[3][reader_key] = who

    def write(self, lo, hi, who, deps, war):
        segs = self.segs
        if segs and segs[-1][1] <= lo:  # append past the end (streaming stores)
            segs.append([lo, hi, who, {}])
            self.los.append(lo)
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

    def all_accessors(self):
        out = set()
        for s in self.segs:
            if s[2] is not None:
                out.add(s[2])
            out.update(s[3].values())
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

    def _rotate(self, key, version, nbuf, deps):
        """A new tile ``version`` takes the slot of the tile ``nbuf`` allocations back in ring
        ``key``: wait for every access of that tile."""
        ring = self.rings.setdefault(key, deque())
        if len(ring) >= nbuf:
            deps.update(ring[-nbuf].all_accessors())
        ring.append(version)
        while len(ring) > nbuf:
            ring.popleft()

    def _map(self, alloc_id):
        m = self.maps.get(alloc_id)
        if m is None:
            m = self.maps[alloc_id] = _RegionMap()
        return m

    def event(self, i, ev) -> list:
        deps: set = set()
        key = (ev.engine, i) if ev.engine == "DMA" else ev.engine
        read_ids = set()
        for r in ev.reads or ():
            read_ids.add(r.alloc_id)
            self._map(r.alloc_id).read(r.lo, r.hi, i, key, deps, track_readers=r.buffer in ONCHIP)
        in_loop = _loop_kind(ev) is not None
        for r in ev.writes or ():
            onchip = r.buffer in ONCHIP
            m = self.maps.get(r.alloc_id)
            if onchip and in_loop:
                nbuf = self.alloc.depth(r.buffer, r.hi - r.lo, r.alloc_id)
                if m is None:  # first write of a tile allocated in a loop
                    m = self.maps[r.alloc_id] = _RegionMap()
                    self._rotate(self.identity(r.alloc_id, r.buffer, ev), m, nbuf, deps)
                elif (
                    self.opts.rename
                    and r.alloc_id not in read_ids
                    and not _accumulates(ev)
                    and m.covered_by(r.lo, r.hi)
                ):
                    # whole overwrite: retire the current version, start a new one in the
                    # buffer of the version nbuf back (nbuf = 1: no renaming)
                    ring = self.rings.setdefault(("version", r.alloc_id), deque())
                    ring.append(m)
                    deps.update(ring[-nbuf].all_accessors() if len(ring) >= nbuf else ())
                    while len(ring) > nbuf:
                        ring.popleft()
                    m = self.maps[r.alloc_id] = _RegionMap()
            if m is None:
                m = self.maps[r.alloc_id] = _RegionMap()
            m.write(r.lo, r.hi, i, deps, war=onchip)
        deps.discard(i)
        return sorted(d for d in deps if d < i)


def build_dependencies(
    events: Sequence[Event],
    opts: ModelOptions,
    alloc_origins: dict | None = None,
    alloc_names: dict | None = None,
    hw: HardwareSpec | None = None,
    peak_sbuf: int = 0,
    placed: frozenset | set = frozenset(),
) -> list:
    """deps[i] = sorted earlier event indices that event i must wait for (an elided repeat --
    loop-invariant transpose, redundant load -- waits only for the instruction it repeats); ``placed``: the
    allocations the kernel placed itself (``Trace.placed_allocs``)."""
    b = _DependencyBuilder(opts, alloc_origins, alloc_names, hw, peak_sbuf, placed)
    deps = [b.event(i, ev) for i, ev in enumerate(events)]
    for j, orig in elisions(events, opts, hw).items():
        if orig >= 0:  # a repeat waits for what it repeats; a folded fill keeps its own dependencies
            deps[j] = [orig]
    return deps


def elisions(events: Sequence[Event], opts: ModelOptions, hw: HardwareSpec | None = None) -> dict:
    """{index of an instruction the compiler removes: index of the one it repeats, or -1}: repeated
    loop-invariant ``nl.matmul`` transposes, for NKI 0.1 builds repeated ``nl.load`` reads
    (compiler.redundant_loads), and PSUM fills folded into the first matmul (compiler.psum_zero_folds, -1)."""
    out = loop_invariant_transposes(events) if opts.hoist_transposes else {}
    if opts.fold_psum_zeros:
        out.update(dict.fromkeys(psum_zero_folds(events), -1))
    if opts.dedup_loads and opts.middle_end and opts.frontend == "nki01":
        budget = get_hardware(hw if hw is not None else "trn2").v("load_reuse_budget_bytes")
        out.update(redundant_loads(events, budget))
    return out


def loop_invariant_transposes(events: Sequence[Event]) -> dict:
    """{index of a repeated nl.matmul transpose/copy pair member: index of the first one}.

    A pair is repeated when, inside a loop, the same source line transposes the same bytes of
    the same allocation with no write to that allocation since the first pair."""
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


def _union_length(intervals) -> float:
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


_DONE, _WAKE = 0, 1


class _Fenwick:
    """Prefix sums over positions 0..n-1 (all ones at the start), O(log n) updates and queries."""

    __slots__ = ("n", "t")

    def __init__(self, n: int):
        self.n = n
        self.t = [0] * (n + 1)
        for i in range(1, n + 1):
            self.t[i] += 1
            j = i + (i & -i)
            if j <= n:
                self.t[j] += self.t[i]

    def add(self, i: int, v: int) -> None:
        i += 1
        while i <= self.n:
            self.t[i] += v
            i += i & -i

    def prefix(self, i: int) -> int:
        """Sum over positions < i."""
        s = 0
        while i > 0:
            s += self.t[i]
            i -= i & -i
        return s


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


class Scheduler:
    """List scheduler over one trace.  ``run()`` drives the steps:

    1. :meth:`_release` — an instruction whose dependencies are all done gets its ready time
       and joins its engine's candidates (DMAs join the DMA ready queue);
    2. :meth:`_dispatch` — a free compute engine starts the first ready instruction within
       its window (or sleeps until the earliest one becomes ready);
    3. :meth:`_issue_dmas` — ready DMAs (list-scheduled in program order within the window,
       :meth:`_next_dma`) go through the issue queues onto the DMA engines;
    4. :meth:`_finish` — a finished instruction releases its dependents.
    """

    def __init__(
        self,
        events: Sequence[Event],
        hw: HardwareSpec,
        opts: ModelOptions,
        deps: list,
        extra_elided: dict | None = None,
    ) -> None:
        self.events = events
        self.hw = hw
        self.opts = opts
        self.deps = deps
        n = len(events)
        self.n = n
        self.dependents: list[list[int]] = [[] for _ in range(n)]
        for i, ds in enumerate(deps):
            for d in ds:
                self.dependents[d].append(i)
        self.remaining = [len(d) for d in deps]
        self.elided = elisions(events, opts, hw)
        self.elided.update(extra_elided or {})
        if opts.place_engines:
            self.engine_of = place_engines(events, lambda ev, e: compute_cost_ns(ev, hw, e)[0])
        else:
            self.engine_of = [str(ev.engine) for ev in events]
        self.window = 1 if opts.serialise else opts.window
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.ready = [0.0] * n
        self.started = [False] * n
        self.done = 0
        self.uncosted: dict = {}
        self.heap: list = []
        self.counter = 0
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
        for i, ev in enumerate(events):
            if ev.engine != "DMA" and i not in self.elided:
                self.queues.setdefault(self.engine_of[i], []).append(i)
        self.qpos = {e: 0 for e in self.queues}
        self.busy = {e: False for e in self.queues}
        self.eng_free = {e: 0.0 for e in self.queues}
        self.wake_at = {e: math.inf for e in self.queues}
        self.n_released = {e: 0 for e in self.queues}  # released, not started (fast exit)
        self.pe = _TensorEngineState(hw)
        # DMA front end
        self.dma_mode = opts.dma_mode(hw)
        self.n_issue = opts.issue_queues(hw)
        self.issue_free = [0.0] * self.n_issue
        self.serial_of = {i: opts.serial_dma(ev) for i, ev in enumerate(events) if ev.engine == "DMA"}
        # the part of a DGE instruction's execution time that is not queue occupancy is latency
        self.issue_latency = max(0.0, hw.v("dge_exec_ns") - hw.v("dge_issue_ns")) if self.dma_mode == "hwdge" else 0.0
        self.L = hw.v("dma_latency_ns")
        self.n_rings = int(hw.v("dma_rings"))
        self.per_ring = int(hw.v("dma_partitions_per_ring"))
        self.ring_free = [0.0] * self.n_rings
        self.max_inflight = int(hw.v("dma_max_inflight"))
        self.slot_free = [0.0] * self.max_inflight
        self.inflight = 0
        self.issue_busy = 0.0
        self.dma_queue = [
            i
            for i, ev in enumerate(events)  # program order
            if ev.engine == "DMA" and i not in self.elided
        ]
        self.dma_pos = 0
        self.dma_released = 0
        self.dma_qpos = {i: k for k, i in enumerate(self.dma_queue)}  # event -> position in the queue
        self.dma_ready_heap: list = []  # positions of released DMAs
        self.dma_unstarted = _Fenwick(len(self.dma_queue))  # 1 per DMA not yet issued
        self.dma_t: dict = {}
        self.cost_memo: dict = {}

    # ---- helpers ------------------------------------------------------------------------
    def _push(self, t, kind, x):
        self.counter += 1
        heapq.heappush(self.heap, (t, self.counter, kind, x))

    def _sig(self, ev, engine):
        mk = ev.payload
        psum = any(r.buffer == "psum" for r in ev.reads) or any(r.buffer == "psum" for r in ev.writes)
        return (ev.op, engine, ev.partitions, ev.free_elems, ev.in_dtypes, ev.out_dtype, ev.bytes, mk, psum)

    def _cost(self, i):
        ev = self.events[i]
        eng = self.engine_of[i]
        key = self._sig(ev, eng)
        if key is not None:
            hit = self.cost_memo.get(key)
            if hit is not None:
                return hit
        val = dma_cost(ev, self.hw, self.dma_mode) if eng == "DMA" else compute_cost_ns(ev, self.hw, eng)
        if key is not None:
            self.cost_memo[key] = val
        return val

    def _hop(self, i, j) -> float:
        ei, ej = self.engine_of[i], self.engine_of[j]
        if ej == "DMA" or j in self.elided or self.elided.get(i, 0) < 0:  # (a folded fill signals nothing)
            return 0.0
        if ei != ej:
            return self.sem + (self.pe_result_ns if ei == "PE" else 0.0)
        return self.bubble_ns.get(ej, 0.0)  # PE accumulation chains have no bubble

    # ---- step 1 -------------------------------------------------------------------------
    def _release(self, j, touched):
        if j in self.elided:  # hoisted repeat: done when its original is
            self.start[j] = self.end[j] = self.ready[j]
            self.started[j] = True
            self._push(self.ready[j], _DONE, j)
        elif self.engine_of[j] == "DMA":
            self.dma_released += 1
            heapq.heappush(self.dma_ready_heap, self.dma_qpos[j])
        else:
            self.n_released[self.engine_of[j]] += 1
            touched.add(self.engine_of[j])

    # ---- step 2 -------------------------------------------------------------------------
    def _dispatch(self, e, now):
        if self.busy[e] or not self.n_released[e]:
            return
        q = self.queues[e]
        p = self.qpos[e]
        while p < len(q) and self.started[q[p]]:
            p += 1
        self.qpos[e] = p
        best = None
        earliest = math.inf
        seen = 0
        k = p
        while k < len(q) and seen < self.window:
            i = q[k]
            k += 1
            if self.started[i]:
                continue
            seen += 1
            if self.remaining[i]:
                continue
            if self.ready[i] <= now:
                best = i
                break
            earliest = min(earliest, self.ready[i])
        if best is None:
            if earliest < self.wake_at[e]:
                self.wake_at[e] = earliest
                self._push(earliest, _WAKE, e)
            return
        if best != q[p]:
            self.reordered += 1
        ev = self.events[best]
        s = max(self.eng_free[e], self.ready[best], now)
        dur, known = self._cost(best)
        if not known:
            self.uncosted[ev.op] = self.uncosted.get(ev.op, 0) + 1
        if e == "PE":
            dur = self.pe.duration(ev, s, dur)
        self.start[best] = s
        self.end[best] = s + dur
        self.started[best] = True
        self.n_released[e] -= 1
        self.busy[e] = True
        self.eng_free[e] = s + dur
        self._push(s + dur, _DONE, best)

    # ---- step 3 -------------------------------------------------------------------------
    def _issue_dmas(self):
        while self.dma_released and self.inflight < self.max_inflight:
            j = self._next_dma()
            if j is None:
                return
            self.dma_released -= 1
            r = self.ready[j]
            c = self._cost(j)
            nq = 1 if self.serial_of[j] else self.n_issue
            k = min(range(nq), key=self.issue_free.__getitem__)
            q = min(range(self.max_inflight), key=self.slot_free.__getitem__)
            s = max(self.issue_free[k], r, self.slot_free[q])
            ie = s + c.issue_ns
            self.issue_free[k] = ie
            self.issue_busy += c.issue_ns
            arrive = ie + self.issue_latency + self.L
            # partition p is served by DMA engine p // 8 (DO: a 4-partition DMA used one engine);
            # the start partition comes from the DMA payload's partition_start
            ds, de = math.inf, 0.0
            first = int(self.events[j].payload.partition_start or 0) // self.per_ring
            for x in ((first + k) % self.n_rings for k in range(min(c.rings, self.n_rings))):
                st = max(self.ring_free[x], arrive)
                self.ring_free[x] = st + c.ring_ns
                ds = min(ds, st)
                de = max(de, st + c.ring_ns)
            self.slot_free[q] = de
            self.dma_t[j] = DmaTiming(r, s, ie, ds, de, q, c, k)
            self.start[j] = s
            self.end[j] = de
            self.started[j] = True
            self.inflight += 1
            self._push(de, _DONE, j)

    def _next_dma(self):
        """The DMA queue is list-scheduled like an engine: the first released DMA (program
        order) among the next ``window`` DMAs not yet issued."""
        h = self.dma_ready_heap
        while h and self.started[self.dma_queue[h[0]]]:
            heapq.heappop(h)
        if not h:
            return None
        pos = h[0]
        if self.dma_unstarted.prefix(pos) >= self.window:  # outside the window
            return None
        heapq.heappop(h)
        self.dma_unstarted.add(pos, -1)
        return self.dma_queue[pos]

    # ---- step 4 -------------------------------------------------------------------------
    def _finish(self, i, now, touched):
        self.done += 1
        ev = self.events[i]
        if ev.engine == "DMA":
            if i not in self.elided:
                self.inflight -= 1
        elif i not in self.elided:
            self.busy[self.engine_of[i]] = False
            touched.add(self.engine_of[i])
        for j in self.dependents[i]:
            self.ready[j] = max(self.ready[j], self.end[i] + self._hop(i, j))
            self.remaining[j] -= 1
            if self.remaining[j] == 0:
                self._release(j, touched)

    def run(self) -> Schedule:
        touched: set[str] = set()  # engines whose queue may dispatch now
        for i in range(self.n):
            if self.remaining[i] == 0:
                self._release(i, touched)
        for e in self.queues:
            self._dispatch(e, 0.0)
        self._issue_dmas()
        while self.heap:
            t, _, kind, x = heapq.heappop(self.heap)
            touched = set()
            if kind == _DONE:
                self._finish(x, t, touched)
            else:
                if self.wake_at[x] == t:
                    self.wake_at[x] = math.inf
                touched.add(x)
            for eng in touched:
                self._dispatch(eng, t)
            self._issue_dmas()
        if self.done != self.n:
            stuck = [i for i in range(self.n) if not self.started[i]][:5]
            raise RuntimeError(
                f"cost model scheduler stalled with {self.n - self.done} instructions "
                f"left (first: {stuck}; dependency cycle in the trace?)"
            )
        return self._result()

    def _result(self) -> Schedule:
        busy = {e: 0.0 for e in COMPUTE_ENGINES}
        for e, q in self.queues.items():
            busy[e] = busy.get(e, 0.0) + sum(self.end[i] - self.start[i] for i in q)
        busy["DMA"] = _union_length([(d.data_start, d.data_end) for d in self.dma_t.values()])
        makespan = max(self.end) if self.n else 0.0
        return Schedule(
            self.start,
            self.end,
            list(self.engine_of),
            self.dma_t,
            self.deps,
            busy,
            self.issue_busy,
            makespan,
            self.uncosted,
            self.pe.throttled_ns,
            self.pe.exposed_ls_ns,
            dict(self.elided),
            self.reordered,
        )


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
) -> Schedule:
    """Schedule ``events``; ``deps`` (from :func:`build_dependencies` with the same options)
    may be passed in to reuse it across hardware variants; ``extra_elided``: more instructions the
    compiler removes ({index: index of the instruction that stands for it}, compiler.vectorised)."""
    opts = opts or ModelOptions()
    if deps is None:
        deps = build_dependencies(events, opts, alloc_origins, alloc_names, hw, peak_sbuf, placed)
    return Scheduler(events, hw, opts, deps, extra_elided).run()
