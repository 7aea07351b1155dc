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

import ast
import functools
import linecache
from collections.abc import Callable, Sequence

from nki_kernels.sim.core.trace import Event

from .hardware import HardwareSpec

HBM = ("hbm", "shared_hbm", "private_hbm")
ONCHIP = ("sbuf", "psum")

# ---- redundant load elimination ---------------------------------------------------------------


def _buf(r) -> str:
    return str(getattr(r.buffer, "value", r.buffer))


def _is_dma(ev) -> bool:
    return str(ev.engine) == "DMA"


def redundant_loads(events: Sequence, budget_bytes_per_partition: float) -> dict:
    """{index of a repeated ``nl.load``: index of the load it repeats}.

    A load repeats an earlier one when both read the same HBM byte range of the same allocation
    into the same number of partitions, nothing wrote that allocation in between, and the bytes per
    partition of the loads performed in between do not exceed ``budget_bytes_per_partition`` (an
    LRU reuse distance: the earlier tile is still resident)."""
    last: dict = {}  # (alloc, lo, hi, partitions, bytes) -> (index, cumulative bytes/partition)
    by_alloc: dict = {}  # HBM alloc -> keys that read it
    cum = 0.0
    out: dict = {}
    for i, ev in enumerate(events):
        if not _is_dma(ev):
            continue
        for w in ev.writes or ():
            if _buf(w) in HBM:
                for key in by_alloc.pop(w.alloc_id, ()):
                    last.pop(key, None)
        if ev.api != "nl.load" or len(ev.reads or ()) != 1 or not ev.writes:
            continue
        r = ev.reads[0]
        if _buf(r) not in HBM or _buf(ev.writes[0]) != "sbuf":
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


# ---- engine placement -------------------------------------------------------------------------

# ops the compiler may place, and where (SDK 2.26 ISA docstrings / tbl-aluop, trn2): a copy runs on
# VectorE, ScalarE or GpSimd (GpSimd cannot read PSUM); tensor_scalar runs on ScalarE only for
# (multiply, add), (multiply, -), (add, -).  GpSimd is left out: the compiler keeps it for software
# descriptor generation and its elementwise rate is several times lower (8 cores x 16 lanes).
FLEXIBLE_OPS = {"tensor_copy": ("DVE", "ACT"), "tensor_scalar": ("DVE", "ACT")}
SCALAR_TENSOR_SCALAR_FUNCS = ("multiply", "add", "subtract", "copy", "")


@functools.lru_cache(maxsize=256)
def _calls(file: str) -> tuple:
    """(first line, last line, function name, has engine= keyword) of every call in ``file``."""
    src = "".join(linecache.getlines(file))
    if not src:
        return ()
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return ()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            given = any(k.arg == "engine" for k in node.keywords)
            out.append((node.lineno, node.end_lineno or node.lineno, name, given))
    return tuple(out)


def engine_given(ev: Event) -> bool:
    """True when the kernel names the engine of the call that produced ``ev`` (``engine=``), read from
    the kernel source (the trace does not record it); ``nl.*`` ops never take one."""
    api = str(ev.api or "")
    if not api.startswith("nisa."):
        return False
    name = api.split(".", 1)[1]
    for lo, hi, fname, has_engine in _calls(ev.file or ""):
        if fname == name and lo <= int(ev.line or 0) <= hi:
            return has_engine
    return True  # source not readable: keep the recorded engine


def _func(ev) -> str:
    return str(getattr(ev.payload, "func", "") or "")


def candidates(ev: Event) -> tuple:
    """Engines the compiler may place ``ev`` on (just its recorded engine when the choice is fixed)."""
    eng = str(ev.engine)
    opts = FLEXIBLE_OPS.get(ev.op)
    if opts is None or eng not in opts or engine_given(ev):
        return (eng,)
    if ev.op == "tensor_scalar" and _func(ev).split(",")[0] not in SCALAR_TENSOR_SCALAR_FUNCS:
        return ("DVE",) if eng == "DVE" else (eng,)
    return opts


def place_engines(events: Sequence[Event], cost_on: Callable[[Event, str], float]) -> list:
    """The engine of every event: the recorded one, or for a flexible op the candidate with the least
    work placed so far (work counted with ``cost_on(ev, engine)`` in ns), as a static balancing pass
    like the compiler's own.  Public profiles of NKI 0.1 kernels (trainium-kernel-fusion attention,
    neuron-profile JSON) show PSUM evictions without ``engine=`` split between ScalarE and VectorE."""
    load = {"ACT": 0.0, "DVE": 0.0, "POOL": 0.0, "PE": 0.0}
    out = []
    for ev in events:
        eng = str(ev.engine)
        if eng == "DMA":
            out.append(eng)
            continue
        cands = candidates(ev)
        if len(cands) > 1:
            costs = {e: cost_on(ev, e) for e in cands}
            eng = min(cands, key=lambda e: (load[e] + costs[e], cands.index(e)))
            load[eng] += costs[eng]
        else:
            load[eng] = load.get(eng, 0.0) + cost_on(ev, eng)
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
        if str(f.kind) != "affine":
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


def sbuf_spill(peak_sbuf_bytes_per_partition: int, hw: HardwareSpec) -> str:
    """A warning when the kernel's live SBUF exceeds what the allocator can use (else "")."""
    usable = hw.v("sbuf_usable_bytes_per_partition")
    if peak_sbuf_bytes_per_partition > usable:
        return (
            f"SBUF over-subscribed: {peak_sbuf_bytes_per_partition / 1024:.1f} KiB per partition live at the peak "
            f"> {usable / 1024:.1f} KiB usable; the compiler may spill to HBM (not modelled)"
        )
    return ""
