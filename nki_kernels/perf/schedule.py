"""The scheduler: a discrete-event simulation of one NeuronCore over an instruction trace.

Model (trn2-hardware.md §4.1), all times in ns:

* **Compute queues** PE, ACT, DVE, POOL are in-order: an instruction starts at
  ``max(engine free, max over its dependencies of (finish + hop))`` where the hop is the
  semaphore time ``sem_ns`` across engines, the dependent-instruction bubble on the same
  engine (not for PE accumulation chains), and the TensorE result latency after a matmul.
* **DMAs** become ready when their dependencies finish.  Ready DMAs are issued in ready order
  by the DMA issue queue (``dge_blocks`` hardware DGEs in ``benchmark`` mode, at ``dge_issue_ns``
  + ``dge_issue_per_desc_ns`` per descriptor; a ~50 ns static trigger in ``profile`` mode,
  which models ``--disable-dge``).  At most ``dma_max_inflight`` DMAs are in flight.  After a
  fixed latency ``dma_latency_ns`` the data moves on ``ceil(P/8)`` of the 16 DMA engines
  (the least busy ones), each engine FIFO at ``max(dma_desc_ns, bytes/23 B/ns)`` per descriptor.
* **Dependencies** through the byte regions each instruction reads and writes: RAW always;
  WAR and WAW for on-chip buffers (SBUF/PSUM); and buffer reuse across loop iterations: a
  tile allocated inside a loop occupies one of ``sequential_buffers`` (sequential_range) or
  ``affine_buffers`` (affine_range / static_range / SPMD) rotating slots, so its first write
  waits for every access of the tile that held the slot before.
* **TensorE throttle** (dI/dt, PX): while TensorE was active less than ``pe_throttle_util``
  of the trailing ``pe_throttle_window_ns`` (wall clock), an instruction runs at
  ``pe_throttle_speed``; a burst after idle thus pays ~0.75 us, and a TensorE starved
  below 50 % runs at half speed (as in the CZ transpose profile).
* LoadStationary (``M/4`` cycles) is exposed only when the stationary operand changes and
  the previous matmul is shorter than it.

The kernel floor T0 is added by the caller (``nki_kernels.perf.model``).
"""
from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field

from .costs import DmaCost, compute_cost_ns, dma_cost, load_stationary_cycles
from .hardware import HardwareSpec

MODES = ("benchmark", "profile")
ONCHIP = ("sbuf", "psum")


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Knobs of the scheduler.

    mode               "benchmark": what nki.benchmark's NCL latency measures (HW-DGE issues each
                       DMA); "profile": neuron-profile ``total_time`` of a ``--disable-dge`` build.
    affine_buffers     rotating copies of a tile allocated inside an affine_range loop
                       (compiler multi-buffering; E, chosen by the calibration fit among 2..8)
    sequential_buffers rotating copies inside a sequential_range loop (1: iteration i+1 may
                       overwrite the tile only after iteration i has read it)
    include_floor      add the kernel floor T0 (launch + I/O + semaphores)
    """
    mode: str = "benchmark"
    affine_buffers: int = 4
    sequential_buffers: int = 1
    include_floor: bool = True

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"ModelOptions(mode): got {self.mode!r}, allowed {MODES}")
        if self.affine_buffers < 1 or self.sequential_buffers < 1:
            raise ValueError("ModelOptions: buffer counts must be >= 1")

    @property
    def dma_mode(self) -> str:
        return "hwdge" if self.mode == "benchmark" else "static"


@dataclass
class DmaTiming:
    ready: float
    issue_start: float
    issue_end: float
    data_start: float
    data_end: float
    queue: int
    cost: DmaCost


@dataclass
class Schedule:
    start: list
    end: list
    engine_of: list
    dma: dict                       # event index -> DmaTiming
    deps: list
    busy_ns: dict                   # engine -> busy ns (DMA: union of data-transfer time)
    issue_busy_ns: float
    makespan_ns: float
    uncosted_ops: dict = field(default_factory=dict)
    throttled_ns: float = 0.0
    exposed_ls_ns: float = 0.0


# ---- dependencies -----------------------------------------------------------------------

class _RegionMap:
    """Per-allocation sorted, non-overlapping segments [lo, hi, writer, readers]; ``los`` mirrors
    the segment starts for bisect."""
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
        if segs and segs[-1][1] <= lo:          # append past the end (streaming stores)
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


def _loop_kind(ev) -> str | None:
    if ev.loops:
        return ev.loops[-1][0]
    if ev.program_id:
        return "affine"
    return None


def build_dependencies(events, opts: ModelOptions, alloc_origins: dict | None = None) -> list:
    """deps[i] = set of earlier event indices that event i must wait for."""
    maps: dict = {}
    first_written: set = set()
    slot_rings: dict = {}
    deps_all = []
    for i, ev in enumerate(events):
        deps: set = set()
        eng = ev.engine
        for r in ev.reads or ():
            m = maps.get(r.alloc_id)
            if m is None:
                m = maps[r.alloc_id] = _RegionMap()
            onchip = r.buffer in ONCHIP
            key = (eng, i) if eng == "DMA" else eng
            m.read(r.lo, r.hi, i, key, deps, track_readers=onchip)
        for r in ev.writes or ():
            m = maps.get(r.alloc_id)
            if m is None:
                m = maps[r.alloc_id] = _RegionMap()
            onchip = r.buffer in ONCHIP
            if onchip and r.alloc_id not in first_written:
                first_written.add(r.alloc_id)
                kind = _loop_kind(ev)
                if kind is not None:
                    nbuf = opts.sequential_buffers if kind == "sequential" else opts.affine_buffers
                    # a buffer is identified by where it was allocated *and* first written, so
                    # distinct tiles from one helper line or one allocation line stay distinct
                    origin = ((alloc_origins or {}).get(r.alloc_id), ev.file, ev.line, ev.op)
                    ring = slot_rings.setdefault((origin, r.buffer), deque())
                    if len(ring) >= nbuf:
                        victim = ring[-nbuf]
                        vm = maps.get(victim)
                        if vm is not None:
                            deps.update(vm.all_accessors())
                    ring.append(r.alloc_id)
                    while len(ring) > nbuf:
                        ring.popleft()
            m.write(r.lo, r.hi, i, deps, war=onchip)
        deps.discard(i)
        deps_all.append(sorted(d for d in deps if d < i))
    return deps_all


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


def schedule(events, hw: HardwareSpec, opts: ModelOptions | None = None,
             alloc_origins: dict | None = None, deps: list | None = None) -> Schedule:
    """Schedule ``events``; ``deps`` (from :func:`build_dependencies` with the same options)
    may be passed in to reuse it across hardware variants."""
    opts = opts or ModelOptions()
    n = len(events)
    if deps is None:
        deps = build_dependencies(events, opts, alloc_origins)
    dependents = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for d in ds:
            dependents[d].append(i)
    remaining = [len(d) for d in deps]

    sem = hw.v("sem_ns")
    bubble_ns = {e: hw.v("dep_bubble_cycles") / hw.v(k) for e, k in
                 (("ACT", "act_clock_ghz"), ("DVE", "dve_clock_ghz"), ("POOL", "pool_clock_ghz"))}
    pe_clock = hw.v("pe_clock_ghz")
    pe_result_ns = hw.v("pe_result_latency_cycles") / pe_clock
    W = hw.v("pe_throttle_window_ns")
    thr_util = hw.v("pe_throttle_util")
    thr_speed = hw.v("pe_throttle_speed")
    L = hw.v("dma_latency_ns")
    n_rings = int(hw.v("dma_rings"))
    max_inflight = int(hw.v("dma_max_inflight"))
    n_issue = int(hw.v("dge_blocks")) if opts.dma_mode == "hwdge" else 1

    queues: dict = {}
    qpos: dict = {}
    prev_in_queue = [-1] * n
    for i, ev in enumerate(events):
        if ev.engine != "DMA":
            q = queues.setdefault(ev.engine, [])
            prev_in_queue[i] = q[-1] if q else -1
            q.append(i)
    for e in queues:
        qpos[e] = 0
    busy_flag = {e: False for e in queues}
    eng_free = {e: 0.0 for e in queues}

    start = [0.0] * n
    end = [0.0] * n
    ready = [0.0] * n
    dma_t: dict = {}
    uncosted: dict = {}
    heap: list = []
    counter = 0
    dma_ready: list = []
    issue_free = [0.0] * n_issue
    ring_free = [0.0] * n_rings
    slot_free = [0.0] * max_inflight
    inflight = 0
    issue_busy = 0.0
    # TensorE state
    pe_hist: deque = deque()          # (start, end, nominal) of recent PE instructions
    pe_last_end = -1.0
    pe_last_nominal = 0.0
    pe_last_stationary = None
    throttled_ns = 0.0
    exposed_ls = 0.0

    def push(t, i):
        nonlocal counter
        counter += 1
        heapq.heappush(heap, (t, counter, i))

    def pe_duration(i, s, nominal):
        nonlocal pe_last_end, pe_last_nominal, pe_last_stationary, throttled_ns, exposed_ls
        ev = events[i]
        if ev.op == "nc_matmul":
            key = None
            if ev.reads:
                r = ev.reads[0]
                key = (r.alloc_id, r.lo, r.hi)
            if key is None or key != pe_last_stationary:
                ls = load_stationary_cycles(ev, hw) / pe_clock
                hidden = pe_last_nominal if abs(s - pe_last_end) < 1e-6 else 0.0
                extra = max(0.0, ls - hidden)
                nominal += extra
                exposed_ls += extra
            pe_last_stationary = key
        while pe_hist and pe_hist[0][1] <= s - W:
            pe_hist.popleft()
        work = 0.0                    # wall-clock TensorE activity in the trailing window
        for hs, he, hn in pe_hist:
            work += max(0.0, he - max(hs, s - W))
        dur = nominal
        if work < thr_util * W:
            dur = nominal / thr_speed
            throttled_ns += dur - nominal
        pe_hist.append((s, s + dur, nominal))
        pe_last_end = s + dur
        pe_last_nominal = nominal
        return dur

    cost_memo: dict = {}

    def _sig(ev):
        m = ev.meta
        try:
            mk = tuple(sorted(m.items())) if m else ()
            hash(mk)
        except TypeError:
            return None
        psum = any(r.buffer == "psum" for r in ev.reads) or any(r.buffer == "psum" for r in ev.writes)
        return (ev.op, ev.engine, ev.partitions, ev.free_elems, ev.in_dtypes, ev.out_dtype, ev.bytes, mk, psum)

    def cost_of(ev):
        key = _sig(ev)
        if key is not None:
            hit = cost_memo.get(key)
            if hit is not None:
                return hit
        val = dma_cost(ev, hw, opts.dma_mode) if ev.engine == "DMA" else compute_cost_ns(ev, hw)
        if key is not None:
            cost_memo[key] = val
        return val

    def try_start(e):
        if busy_flag[e]:
            return
        q = queues[e]
        p = qpos[e]
        if p >= len(q):
            return
        i = q[p]
        if remaining[i]:
            return
        ev = events[i]
        s = max(eng_free[e], ready[i])
        dur, known = cost_of(ev)
        if not known:
            uncosted[ev.op] = uncosted.get(ev.op, 0) + 1
        if e == "PE":
            dur = pe_duration(i, s, dur)
        start[i] = s
        end[i] = s + dur
        busy_flag[e] = True
        eng_free[e] = s + dur
        push(s + dur, i)

    def try_issue():
        nonlocal inflight, issue_busy
        while dma_ready and inflight < max_inflight:
            r, _, j = heapq.heappop(dma_ready)
            c = cost_of(events[j])
            k = 0 if n_issue == 1 else min(range(n_issue), key=issue_free.__getitem__)
            q = min(range(max_inflight), key=slot_free.__getitem__)
            s = max(issue_free[k], r, slot_free[q])
            ie = s + c.issue_ns
            issue_free[k] = ie
            issue_busy += c.issue_ns
            arrive = ie + L
            if c.rings >= n_rings:
                order = range(n_rings)
            elif c.rings == 1:
                order = (min(range(n_rings), key=ring_free.__getitem__),)
            else:
                order = heapq.nsmallest(c.rings, range(n_rings), key=ring_free.__getitem__)
            ds, de = math.inf, 0.0
            for x in order:
                st = max(ring_free[x], arrive)
                ring_free[x] = st + c.ring_ns
                ds = min(ds, st)
                de = max(de, st + c.ring_ns)
            slot_free[q] = de
            dma_t[j] = DmaTiming(r, s, ie, ds, de, q, c)
            start[j] = s
            end[j] = de
            inflight += 1
            push(de, j)

    def hop(i, j):
        ei, ej = events[i].engine, events[j].engine
        if ej == "DMA":
            return 0.0
        if ei != ej:
            return sem + (pe_result_ns if ei == "PE" else 0.0)
        if ej == "PE":
            return 0.0
        return bubble_ns.get(ej, 0.0) if prev_in_queue[j] == i else 0.0

    for i in range(n):
        if remaining[i] == 0 and events[i].engine == "DMA":
            counter += 1
            heapq.heappush(dma_ready, (0.0, i, i))
    for e in queues:
        try_start(e)
    try_issue()

    while heap:
        t, _, i = heapq.heappop(heap)
        ev = events[i]
        if ev.engine == "DMA":
            inflight -= 1
        else:
            busy_flag[ev.engine] = False
            qpos[ev.engine] += 1
        touched = set()
        for j in dependents[i]:
            ready[j] = max(ready[j], end[i] + hop(i, j))
            remaining[j] -= 1
            if remaining[j] == 0:
                if events[j].engine == "DMA":
                    heapq.heappush(dma_ready, (ready[j], j, j))
                else:
                    touched.add(events[j].engine)
        if ev.engine != "DMA":
            touched.add(ev.engine)
        for e in touched:
            try_start(e)
        try_issue()

    for e, q in queues.items():
        if qpos[e] != len(q):
            raise RuntimeError(f"cost model scheduler stalled on engine {e} at event {q[qpos[e]]} "
                               "(dependency cycle in the trace?)")
    busy = {e: 0.0 for e in ("PE", "ACT", "DVE", "POOL")}
    for e, q in queues.items():
        busy[e] = busy.get(e, 0.0) + sum(end[i] - start[i] for i in q)
    busy["DMA"] = _union_length([(d.data_start, d.data_end) for d in dma_t.values()])
    makespan = max(end) if n else 0.0
    return Schedule(start, end, [ev.engine for ev in events], dma_t, deps, busy, issue_busy,
                    makespan, uncosted, throttled_ns, exposed_ls)
