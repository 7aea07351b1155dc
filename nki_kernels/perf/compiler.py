"""What neuronx-cc does to a kernel's instruction stream before the engines run it, as far as the
cost model needs it.  Each function reads the interpreter's trace and returns a decision the
scheduler applies; none edits the trace.

* :func:`redundant_loads` — an ``nl.load`` (NKI 0.1: the compiler allocates the result tile) that
  reads exactly the bytes an earlier ``nl.load`` read, with no store to them in between, is served
  from the earlier tile when the bytes loaded in between fit the SBUF the allocator can keep
  (loop-invariant load hoisting / common-subexpression elimination).  ``nisa.dma_copy`` into a
  kernel-allocated buffer is an explicit instruction and is always performed.
* :func:`place_engines` — an op whose engine the kernel did not choose goes to the engine the
  compiler would pick among those that can run it (VectorE / ScalarE for copies and
  multiply/add-by-scalar), balancing the work already placed.
* :func:`vectorisable_loops` — ``affine_range`` loops of many tiny instructions, which the compiler
  may merge across iterations ("allows ... loop vectorization", the ``affine_range`` docstring):
  not modelled; reported so that the estimate's band widens.
* :func:`sbuf_spill` — a kernel whose SBUF allocation exceeds what the allocator can use: the
  compiler spills (known-issues page); not modelled, reported.

Sources and the public measurements each rule was checked against are in docs/cost-model.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from nki_kernels.sim.core import engines as _engines
from nki_kernels.sim.core.trace import Dma, Elementwise, Event, Matmul, Reduce, Transpose

from .hardware import HardwareSpec

HBM = ("hbm", "shared_hbm", "private_hbm")
ONCHIP = ("sbuf", "psum")

# ---- redundant load elimination ---------------------------------------------------------------


def _buf(r) -> str:
    b = r.buffer
    return b if type(b) is str else str(getattr(b, "value", b))


_API, _OP = attrgetter("api"), attrgetter("op")


def _is_dma(ev) -> bool:
    return ev.engine == "DMA"  # (Engine is a str enum)


def redundant_loads(events: Sequence, budget_bytes_per_partition: float) -> dict:
    """{index of a repeated ``nl.load``: index of the load it repeats}.

    A load repeats an earlier one when both read the same HBM byte range of the same allocation
    into the same number of partitions, nothing wrote that allocation in between, and the bytes per
    partition of the loads performed in between do not exceed ``budget_bytes_per_partition`` (an
    LRU reuse distance: the earlier tile is still resident)."""
    if "nl.load" not in set(map(_API, events)):  # (a C-speed look first: most kernels of a million have none)
        return {}
    last: dict = {}  # (alloc, lo, hi, partitions, bytes) -> (index, cumulative bytes/partition)
    by_alloc: dict = {}  # HBM alloc -> keys that read it
    cum = 0.0
    out: dict = {}
    for i, ev in enumerate(events):
        if not _is_dma(ev):
            continue
        for w in ev.writes or ():
            if w.buffer in HBM:
                for key in by_alloc.pop(w.alloc_id, ()):
                    last.pop(key, None)
        if ev.api != "nl.load" or len(ev.reads or ()) != 1 or not ev.writes:
            continue
        r = ev.reads[0]
        if r.buffer not in HBM or ev.writes[0].buffer != "sbuf":
            continue
        parts = max(1, int(ev.partitions or 1))
        key = (r.alloc_id, r.lo, r.hi, parts, int(ev.bytes or 0))
        hit = last.get(key)
        if hit is not None and cum - hit[1] <= budget_bytes_per_partition:
            out[i] = hit[0]
            continue
        cum += int(ev.bytes or 0) / parts
        last[key] = (i, cum)
        by_alloc.setdefault(r.alloc_id, []).append(key)
    return out


# ---- PSUM zeroing folded into the first matmul ----------------------------------------------------


def psum_zero_folds(events: Sequence) -> list:
    """Indices of ``nl.zeros(..., buffer=nl.psum)`` fills (a memset of a PSUM tile) whose next access is
    an accumulating matmul writing over them: the compiler gives that first matmul the overwrite flag
    instead ("the first matmul targeting a PSUM location overwrites ... subsequent writes accumulate",
    ``nc_matmul`` ``accumulate`` docstring, aws-neuron-sdk 81ce03ae ``nki/api/nki/isa/__init__.py``),
    so the fill costs nothing.  The §3.1c conv needs it: one fill per output row on VectorE, ahead of
    each row's first matmul, would idle TensorE ~190 ns per row (3 % of the measured 824 us)."""
    if "memset" not in set(map(_OP, events)):
        return []
    pending: dict = {}  # PSUM alloc id -> (memset index, lo, hi)
    out = []
    for i, ev in enumerate(events):
        writes = tuple(ev.writes or ())
        if ev.op == "memset" and len(writes) == 1 and str(writes[0].buffer) == "psum":
            w = writes[0]
            pending[w.alloc_id] = (i, w.lo, w.hi)
            continue
        if not pending:
            continue
        touched = {r.alloc_id for r in (ev.reads or ())} | {r.alloc_id for r in writes}
        for aid in touched & pending.keys():
            k, lo, hi = pending.pop(aid)
            p = ev.payload
            if (
                ev.op == "nc_matmul"
                and getattr(p, "accumulate", False)
                and any(w.alloc_id == aid and w.lo <= lo and w.hi >= hi for w in writes)
            ):
                out.append(k)
    return out


@dataclass(frozen=True)
class Allocation:
    """How many physical tiles the compiler's allocator gives each version of an on-chip tensor.

    SDK docs: the allocator "could choose to allocate 2 physical tiles ... then the DMA copy from HBM to
    SBUF can overlap" -- a space-time trade-off it makes at liberty (``nki/migration/index.rst``, block
    dimensions); the §3.1c measurement (one input-row buffer declared before every loop, refilled 2,660
    times inside ``sequential_range`` loops of a ``skip_middle_end_transformations`` build, yet 90 % MFU)
    shows it makes it whatever the loop kind and the build.  So a tile written whole inside a loop (a
    new version) and a tile allocated inside a loop rotate through ``depth`` physical copies:

    * a directly allocated tile (``ncc.sbuf.alloc`` / ``mod_alloc``) keeps the place the kernel gave it: 1;
    * a PSUM tile: ``psum_depth`` (8 banks shared by every PSUM tile; fitted);
    * an SBUF tile: as many copies as ``multibuffer_budget_bytes`` per partition holds (at least 2, at most
      ``multibuffer_max_depth``), bounded by the SBUF the kernel leaves free at its peak (``room``; None
      when the trace's count cannot be trusted: over the usable SBUF, as NKI 0.7 traces count tiles
      until the end of their Python scope)."""

    budget: float
    max_depth: int
    psum_depth: int
    room: float | None
    direct: frozenset

    serialise: bool = False

    def depth(self, buffer: object, tile_bytes: int, alloc_id: int | None = None) -> int:
        if self.serialise or (alloc_id is not None and alloc_id in self.direct):
            return 1
        if str(buffer) == "psum":
            return self.psum_depth
        tile = max(1, int(tile_bytes))
        cap = max(self.budget, 2 * tile)
        if self.room is not None:
            cap = min(cap, self.room + tile)
        return max(1, min(self.max_depth, int(cap // tile)))


def allocation(hw: HardwareSpec, placed: frozenset | set, peak_sbuf: int, opts: Any) -> Allocation:
    """The :class:`Allocation` of one trace (``placed``: the allocation ids the kernel placed itself,
    ``Trace.placed_allocs`` -- ncc.sbuf/psum.alloc/mod_alloc, NKI 0.7 address= -- which the compiler's allocator
    does not re-place, so a whole overwrite of one is not a new version in another buffer; ``peak_sbuf``: its peak
    live SBUF bytes per partition)."""
    usable = hw.v("sbuf_usable_bytes_per_partition")
    room = usable - peak_sbuf if 0 < peak_sbuf <= usable else None
    return Allocation(
        hw.v("multibuffer_budget_bytes"),
        int(hw.v("multibuffer_max_depth")),
        int(opts.psum_buffers),
        room,
        frozenset(placed),
        bool(getattr(opts, "serialise", False)),
    )


# ---- engine placement -------------------------------------------------------------------------

# Where the compiler may place an op the kernel did not pin: the interpreter's legality table
# (nki_kernels/sim/core/engines.py: SDK 2.26 tbl-aluop and the per-instruction ISA rules) is the one source
# of truth; this module only chooses among the engines it allows.  A copy is not an ALU op: tensor_copy
# runs on VectorE, ScalarE or GpSimd (ISA ``engine`` parameter); GpSimd is left out of the choice because
# the compiler keeps it for software descriptor generation and its elementwise rate is several times lower
# (8 cores x 16 lanes).
FLEXIBLE_OPS = ("tensor_copy", "tensor_scalar")
_PLACEABLE = ("DVE", "ACT")


def _engines_of_alu(funcs: Sequence[str]) -> tuple:
    """Engines among VectorE/ScalarE where ``tensor_scalar`` with ALU ops ``funcs`` (op0, op1) is legal
    per engines.py: every op legal there (ALU_OPS), and on ScalarE the (op0, op1) pair one of
    SCALAR_TENSOR_SCALAR."""
    ops = [_engines.canonical(f) for f in funcs if f]
    if not ops or any(op not in _engines.ALU_OPS for op in ops):
        return ("DVE",)
    pair = (ops[0], ops[1] if len(ops) > 1 else None)
    out = []
    for e in _PLACEABLE:
        if not all(_engines.legal(op, e) for op in ops):
            continue
        if e == "ACT" and pair not in _engines.SCALAR_TENSOR_SCALAR:
            continue
        out.append(e)
    return tuple(out) or ("DVE",)


def _func(ev) -> str:
    return str(getattr(ev.payload, "func", "") or "")


def candidates(ev: Event) -> tuple:
    """Engines the compiler may place ``ev`` on (just its recorded engine when the choice is fixed)."""
    eng = str(ev.engine)
    if ev.op not in FLEXIBLE_OPS or eng not in _PLACEABLE or ev.engine_given:
        return (eng,)
    opts = _PLACEABLE if ev.op == "tensor_copy" else _engines_of_alu(_func(ev).split(","))
    return opts if eng in opts else (eng,)


def place_engines(
    events: Sequence[Event],
    cost_on: Callable[[Event, str], float],
    cost_key: Callable[[Event], Any] | None = None,
    engines: Sequence[str] | None = None,
) -> list:
    """The engine of every event: the recorded one, or for a flexible op the candidate with the least
    work placed so far (work counted with ``cost_on(ev, engine)`` in ns), as a static balancing pass
    like the compiler's own.  Public profiles of NKI 0.1 kernels (trainium-kernel-fusion attention,
    neuron-profile JSON) show PSUM evictions without ``engine=`` split between ScalarE and VectorE.

    ``cost_key(ev)``: a key of everything ``cost_on`` reads of an event (events with one key cost the
    same), to cost each kind of instruction once.  The work after the last flexible op decides nothing
    and is not counted.  ``engines``: the recorded engines' names (``TraceFacts.engine``) when the caller has them."""
    if engines is None:
        names = {"PE": "PE", "ACT": "ACT", "DVE": "DVE", "POOL": "POOL", "DMA": "DMA"}
        engines = [names.get(ev.engine) or str(ev.engine) for ev in events]
    engs = engines
    cands_of: dict = {}  # index -> candidates, for the events with more than one
    seen: dict = {}  # what candidates() reads of an event -> its candidates
    for i, (ev, eng) in enumerate(zip(events, engs, strict=True)):
        if eng != "DMA" and ev.op in FLEXIBLE_OPS:
            k = (ev.op, eng, ev.engine_given, _func(ev))
            cands = seen.get(k)
            if cands is None:
                cands = seen[k] = candidates(ev)
            if len(cands) > 1:
                cands_of[i] = cands
    if not cands_of:
        return list(engs)
    last = max(cands_of)
    memo: dict = {}  # (cost key, engine or candidates) -> cost, or the candidates' ((engine, cost), ...)
    load = {"ACT": 0.0, "DVE": 0.0, "POOL": 0.0, "PE": 0.0}
    out = []
    for i, (ev, eng) in enumerate(zip(events, engs, strict=True)):
        if eng == "DMA" or i > last:
            out.append(eng)
            continue
        flex = cands_of.get(i)
        mk = None if cost_key is None else (cost_key(ev), flex or eng)
        hit = None if mk is None else memo.get(mk)
        if flex is not None:
            if hit is None:
                hit = tuple((e, cost_on(ev, e)) for e in flex)
                if mk is not None:
                    memo[mk] = hit
            # the least loaded after it; at equal loads the first candidate
            eng, c = hit[0]
            best = load[eng] + c
            for e, ce in hit[1:]:
                v = load[e] + ce
                if v < best:
                    eng, c, best = e, ce, v
            load[eng] += c
        else:
            if hit is None:
                hit = cost_on(ev, eng)
                if mk is not None:
                    memo[mk] = hit
            load[eng] = load.get(eng, 0.0) + hit
        out.append(eng)
    return out


# ---- outside what the model covers: warnings ----------------------------------------------------

TINY_ELEMS = 64  # elements per partition at or below which an instruction is fixed-cost dominated
TINY_LOOP_TRIPS = 32  # iterations from which merging them would change the estimate materially


def vectorisable_loops(events: Sequence) -> list:
    """[(file:line of the loop, trip count, instructions per iteration)] of ``affine_range`` loops with
    at least ``TINY_LOOP_TRIPS`` iterations whose compute instructions all handle at most
    ``TINY_ELEMS`` elements per partition (the compiler may merge them across iterations)."""
    loops: dict = {}
    for ev in events:
        frames = ev.loops or ()
        if not frames or _is_dma(ev):
            continue
        f = frames[-1]
        if f.kind != "affine":  # (LoopKind is a str enum)
            continue
        rec = loops.setdefault((f.file, f.line), [0, True, int(f.trip_count or 0), set()])
        rec[0] += 1
        rec[1] = rec[1] and int(ev.free_elems or 0) <= TINY_ELEMS
        rec[3].add(f.iteration)
    out = []
    for (file, line), (n, tiny, trips, iters) in loops.items():
        trips = trips or len(iters)
        if tiny and trips >= TINY_LOOP_TRIPS:
            out.append((f"{file}:{line}", trips, max(1, n // max(1, len(iters)))))
    return out


def _scaled(ev: Event, times: int) -> Event:
    """``ev`` doing the work of ``times`` copies of itself in one instruction (elements, bytes and
    descriptors multiplied; fixed costs paid once)."""
    p = ev.payload
    if type(p) is Dma:
        p = p._replace(descriptors=max(1, int(p.descriptors or 1)) * times)
    elif type(p) is Matmul:
        p = p._replace(N=p.N * times)
    elif isinstance(p, Elementwise):
        p = p._replace(elems=p.elems * times)
    elif isinstance(p, Reduce):
        p = p._replace(elems=p.elems * times)
    elif type(p) is Transpose:
        p = p._replace(F=p.F * times)
    return ev._replace(
        free_elems=int(ev.free_elems or 1) * times,
        bytes=int(ev.bytes or 0) * times,
        flops=int(ev.flops or 0) * times,
        payload=p,
    )


def vectorised(events: Sequence[Event], deps: Sequence, loops: list | None = None) -> tuple:
    """The fast alternative for the loops :func:`vectorisable_loops` reports: the compiler merges the
    iterations of each such ``affine_range`` loop ("allows ... loop vectorization", the affine_range
    docstring), so each source line of the body runs as ONE instruction doing all iterations' work.

    Returns ``(events, deps, elided)``: the first instance of each (loop entry, line, op) stands for the
    group (its work multiplied by the group size, its dependencies the union of the group's, mapped to
    the standing-in instructions and kept only when earlier); every other instance is elided and
    finishes with it.  A bound, not a prediction: how far the compiler really merges is not documented.
    ``loops``: :func:`vectorisable_loops` of ``events`` when the caller has it."""
    sites = {site for site, _, _ in (vectorisable_loops(events) if loops is None else loops)}
    group_of: dict = {}
    first: dict = {}
    count: dict = {}
    in_sites: dict = {}  # (file, line) of a loop -> one of the sites
    for i, ev in enumerate(events):
        f = ev.loops[-1] if ev.loops else None
        if f is None or f.kind != "affine":
            continue
        fl = (f.file, f.line)
        ok = in_sites.get(fl)
        if ok is None:
            ok = in_sites[fl] = f"{f.file}:{f.line}" in sites
        if not ok:
            continue
        key = (f.loop_id, ev.file, ev.line, ev.op)
        first.setdefault(key, i)
        count[key] = count.get(key, 0) + 1
        group_of[i] = key
    new_events = list(events)
    new_deps = list(deps)  # (entries replaced below, never edited: the lists are shared with ``deps``)
    merged: dict = {}
    elided: dict = {}
    for i, key in group_of.items():
        r = first[key]
        acc = merged.setdefault(r, set())
        for d in deps[i]:
            m = first[group_of[d]] if d in group_of else d
            if m < r:
                acc.add(m)
        if i != r:
            elided[i] = r
            new_deps[i] = [r]
    for key, r in first.items():
        new_deps[r] = sorted(merged.get(r, ()))
        new_events[r] = _scaled(events[r], count[key])
    return new_events, new_deps, elided


def sbuf_spill(peak_sbuf_bytes_per_partition: int, hw: HardwareSpec) -> str:
    """A warning when the kernel's live SBUF exceeds what the allocator can use (else "")."""
    usable = hw.v("sbuf_usable_bytes_per_partition")
    if peak_sbuf_bytes_per_partition > usable:
        return (
            f"SBUF over-subscribed: {peak_sbuf_bytes_per_partition / 1024:.1f} KiB per partition live at the peak "
            f"> {usable / 1024:.1f} KiB usable; the compiler may spill to HBM (not modelled)"
        )
    return ""
