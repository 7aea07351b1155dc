"""The scheduler reads loop programs (perf/steady.py): when its state repeats it writes the remaining
iterations from the cycle it ran.  Every schedule it makes that way equals the one made event by event (to
floating-point rounding: 1e-6 ns here); loops whose input does not repeat are scheduled event by event."""

from __future__ import annotations

import numpy as np
import pytest

from nki_kernels.perf.hardware import get_hardware
from nki_kernels.perf.model import ModelOptions, build_options, estimate_trace, trace_of
from nki_kernels.perf.schedule import (
    WANT_SERIALISED,
    DmaTiming,
    Scheduler,
    TraceFacts,
    _union_length,
    build_dependencies,
)
from nki_kernels.sim import speed
from nki_kernels.sim.nki01 import isa as nisa
from nki_kernels.sim.nki01 import language as nl
from nki_kernels.sim.nki01.kernel import jit

# the CS149 part 1 starter's shape (speed.VECTOR_ADD): add_rows with its tensor_scalar (an op the compiler may place
# on VectorE or ScalarE); add_rows_tt with the ALU op VectorE runs (tensor_tensor: no engine to choose)
ADD = speed.VECTOR_ADD
KERNELS = (
    ADD.format(name="add_rows", op="nisa.tensor_scalar(ta, nl.add, tb)")
    + ADD.format(name="add_rows_tt", op="nisa.tensor_tensor(ta, tb, nl.add)")
    + """
def body(x):  # loads, ops the compiler places on VectorE or ScalarE, ScalarE's exp, stores
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[1] // 4):
        t = nl.load(x[:, i * 4 : i * 4 + 4])
        u = nisa.tensor_scalar(t, nl.multiply, 1.5)
        v = nisa.tensor_tensor(u, t, nl.maximum)
        w = nl.exp(v)
        c = nisa.tensor_copy(w)
        nl.store(out[:, i * 4 : i * 4 + 4], value=c)
    return out

def two_loops(x, y):  # two loops one after the other, on their own tensors; then a sequential one
    o1 = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    o2 = nl.ndarray(y.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[1] // 2):
        nl.store(o1[:, i * 2 : i * 2 + 2], value=nisa.tensor_scalar(nl.load(x[:, i * 2 : i * 2 + 2]), nl.multiply, 2.0))
    for j in nl.sequential_range(y.shape[1] // 2):
        nl.store(o2[:, j * 2 : j * 2 + 2], value=nisa.tensor_scalar(nl.load(y[:, j * 2 : j * 2 + 2]), nl.add, 1.0))
    return o1, o2

def waits_on_before(x, s):  # every iteration reads a tile loaded before the loop: not closed
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    k = nl.load(s)
    for i in nl.affine_range(x.shape[1] // 2):
        nl.store(out[:, i * 2 : i * 2 + 2], value=nisa.tensor_scalar(nl.load(x[:, i * 2 : i * 2 + 2]), nl.multiply, k))
    return out
"""
)
NS = speed._user_kernels(KERNELS, nl=nl, nisa=nisa)
HW = get_hardware("trn2")


def _trace(name: str, *shapes: tuple):
    k = jit(NS[name])
    args = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in shapes]
    return k, trace_of(k, *args, numerics=False)[1]


CASES = {
    "add_rows": ((1200,), (1200,)),
    "add_rows_tt": ((1200,), (1200,)),
    "body": ((128, 4 * 900),),
    "two_loops": ((128, 2 * 800), (128, 2 * 700)),
}


def _both(k, tr, opts=None, in_order=False):
    """(event by event, with the loop programs) schedules of one trace, and the steady scheduler; ``in_order``:
    the one-pass schedule of a window of 1 (Scheduler.run_in_order, the not-pipelined alternative)."""
    opts = opts or ModelOptions(**build_options(k))
    ev = list(tr.events)
    out = []
    for runs in ((), tr.loop_runs):
        f = TraceFacts(ev, runs)
        deps = build_dependencies(ev, opts, tr.alloc_origins, tr.alloc_names, HW, 0, set(), f)
        sc = Scheduler(ev, HW, opts, deps, None, f)
        out.append(sc.run_in_order() if in_order else sc.run())
    # the makespan alone (what the estimate's alternatives read): the same pass, writing less of the cycles
    alone = Scheduler(ev, HW, opts, deps, None, f)
    m = alone.makespan_ns()
    assert (m, alone.skipped) == (out[1].makespan_ns, sc.skipped)
    assert abs(m - out[0].makespan_ns) <= 1e-6
    return out[0], out[1], sc


def _assert_same(a, b):
    tol = 1e-6
    assert a.makespan_ns > 0
    assert len(a.start) == len(b.start)
    assert max(abs(x - y) for x, y in zip(a.start + a.end, b.start + b.end, strict=True)) <= tol
    assert a.dma.keys() == b.dma.keys()
    for k, x in a.dma.items():
        y = b.dma[k]
        assert (x.queue, x.dge, x.cost) == (y.queue, y.dge, y.cost), k
        assert max(abs(p - q) for p, q in zip(x[:5], y[:5], strict=True)) <= tol, k
    assert abs(a.issue_busy_ns - b.issue_busy_ns) <= tol * len(a.start)
    assert a.busy_ns.keys() == b.busy_ns.keys()
    assert all(abs(a.busy_ns[e] - b.busy_ns[e]) <= tol * len(a.start) for e in a.busy_ns)
    assert (a.reordered, a.uncosted_ops, a.engine_of) == (b.reordered, b.uncosted_ops, b.engine_of)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("opt", [{}, {"serialise": False, "middle_end": False}, {"place_engines": False}])
def test_steady_schedule_equals_the_event_by_event_one(name, opt):
    k, tr = _trace(name, *CASES[name])
    assert tr.loop_runs, "the loops ran as programs"
    opts = ModelOptions(**{**build_options(k), **opt})
    full, steady, sc = _both(k, tr, opts)
    _expect_steady(name, opt.get("place_engines", True), sc, len(tr.events))
    _assert_same(full, steady)


def _expect_steady(name, place, sc, n):
    if name == "body" and place:
        # tensor_scalar / tensor_copy balanced over VectorE and ScalarE (compiler.place_engines): at equal loads
        # the greedy choice follows the rounding of the sums, and in this loop the engines never repeat for
        # long; scheduled event by event, still the same schedule
        assert sc.skipped == 0
        assert "engines or dependencies do not repeat" in sc.steady_why
    elif name == "add_rows_tt" or not place:
        assert sc.skipped > n // 3, "most iterations were written from a repeating cycle"
    # (otherwise the balanced engines repeat between the points where the rounding breaks the pattern: whether
    # a cycle is found between two of them in a loop this short depends on where they fall)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("place", [True, False])
def test_steady_in_order_schedule_equals_the_event_by_event_one(name, place):
    k, tr = _trace(name, *CASES[name])
    opts = ModelOptions(**{**build_options(k), "serialise": True, "place_engines": place})
    full, steady, sc = _both(k, tr, opts, in_order=True)
    _expect_steady(name, place, sc, len(tr.events))
    _assert_same(full, steady)


def test_a_loop_waiting_on_an_instruction_before_it_is_scheduled_event_by_event():
    k, tr = _trace("waits_on_before", (128, 2 * 800), (128, 1))
    assert tr.loop_runs
    full, steady, sc = _both(k, tr)
    assert sc.skipped == 0
    _assert_same(full, steady)


def test_an_iteration_that_differs_stops_the_steady_state():
    """One instruction near the end of the loop made bigger: the input no longer repeats up to the loop's end,
    so no cycle is written from another (the check is on the input, not only on the state)."""
    k, tr = _trace("add_rows", (1200,), (1200,))
    run = tr.loop_runs[0]
    i = run.first + (run.trips - 40) * run.per_iteration + 2  # the tensor_scalar of an iteration near the end
    ev = tr.events[i]
    tr.events[i] = ev._replace(free_elems=ev.free_elems * 64, bytes=ev.bytes * 64)
    full, steady, sc = _both(k, tr)
    assert sc.skipped == 0
    _assert_same(full, steady)


def test_estimates_equal_with_and_without_the_loop_programs():
    k, tr = _trace("body", (128, 4 * 900))
    opts = ModelOptions(**build_options(k))
    a = estimate_trace(tr, options=opts)
    runs, tr.loop_runs = tr.loop_runs, []
    b = estimate_trace(tr, options=opts)
    tr.loop_runs = runs
    assert a.latency_us > 0
    assert a.latency_us == pytest.approx(b.latency_us, rel=1e-12)
    assert [x.latency_us for x in a.alternatives] == pytest.approx([x.latency_us for x in b.alternatives], rel=1e-12)
    assert a.engine_busy_us == pytest.approx(b.engine_busy_us, rel=1e-12)


def test_the_estimate_says_how_the_scheduler_read_the_loops():
    """Estimate.steady (printed by `nki-kernels run --verbose` with --estimate-benchmark): the loops written
    from a cycle, with their line, and why the others were scheduled event by event."""
    k, tr = _trace("add_rows_tt", (1200,), (1200,))
    e = estimate_trace(tr, options=ModelOptions(**build_options(k)), keep=False)
    line = tr.loop_runs[0].line
    assert f"loop at line {line}: " in e.steady
    assert "of 4,800 instructions written from a repeating cycle of" in e.steady
    k, tr = _trace("body", (128, 4 * 900))
    e = estimate_trace(tr, options=ModelOptions(**build_options(k)), keep=False)
    assert "written from" not in e.steady
    assert "scheduled event by event" in e.steady and "engines or dependencies do not repeat" in e.steady
    tr.loop_runs = []
    assert estimate_trace(tr, options=ModelOptions(**build_options(k)), keep=False).steady == ""


def test_balanced_engines_repeat_between_the_points_where_rounding_breaks_them():
    """The CS149 part 1 starter's shape (tensor_scalar, placed by balancing) at 16,000 iterations: the placement
    repeats every 9 instructions except where the sums of costs cross a power of two; the scheduler writes the
    cycles between two such points and simulates across them: the same schedules, most of it written."""
    k, tr = _trace("add_rows", (16000,), (16000,))
    for in_order in (False, True):
        opts = ModelOptions(**{**build_options(k), "serialise": in_order})
        full, steady, sc = _both(k, tr, opts, in_order=in_order)
        assert sc.skipped > len(tr.events) // 2
        _assert_same(full, steady)


def test_the_trace_records_each_loop_program_with_its_instructions_and_tiles():
    k, tr = _trace("two_loops", (128, 2 * 800), (128, 2 * 700))
    a, b = tr.loop_runs
    assert (a.per_iteration, a.trips, b.per_iteration, b.trips) == (3, 800, 3, 700)
    assert b.first == a.first + 3 * 800 and len(tr.events) == b.first + 3 * 700
    for run in (a, b):
        ev0 = tr.events[run.first : run.first + run.per_iteration]
        evk = tr.events[run.first + 5 * run.per_iteration : run.first + 6 * run.per_iteration]
        assert [e.op for e in ev0] == [e.op for e in evk] == ["dma_copy", "tensor_scalar", "dma_copy"]
        assert evk[0].loops[-1].iteration == 5 and evk[0].line == ev0[0].line
        # the tiles of iteration k: allocation ids first_alloc + k * allocs_per_iteration onwards
        assert run.allocs_per_iteration >= 1
        k5 = run.first_alloc + 5 * run.allocs_per_iteration
        written = {r.alloc_id for e in evk for r in e.writes}
        assert k5 in written


def _random_body(rng) -> tuple[str, int, int]:
    """A loop body of loads, VectorE / ScalarE / flexible ops and stores on (128, w) slices, drawn from ``rng``."""
    w = int(rng.choice([1, 4, 32]))
    lines = [f"t0 = nl.load(x[:, i * {w} : i * {w} + {w}])"]
    n = 0
    for _ in range(int(rng.integers(1, 5))):
        src = f"t{n}"
        op = rng.choice(["ts", "tt", "exp", "copy", "sq"])
        n += 1
        if op == "ts":
            lines.append(f"t{n} = nisa.tensor_scalar({src}, nl.multiply, {float(rng.uniform(0.5, 2)):.3f})")
        elif op == "tt":
            lines.append(f"t{n} = nisa.tensor_tensor({src}, t0, nl.add)")
        elif op == "exp":
            lines.append(f"t{n} = nl.exp({src})")
        elif op == "copy":
            lines.append(f"t{n} = nisa.tensor_copy({src})")
        else:
            lines.append(f"t{n} = nl.multiply({src}, {src})")
    lines.append(f"nl.store(out[:, i * {w} : i * {w} + {w}], value=t{n})")
    trips = int(rng.integers(600, 1500))
    body = "\n        ".join(lines)
    src = f"""
def k(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[1] // {w}):
        {body}
    return out
"""
    return src, w, trips


@pytest.mark.parametrize("seed", range(8))
def test_random_loop_bodies_schedule_the_same_either_way(seed):
    """Randomly drawn loop bodies (fixed seeds), each under a random choice of options, pipelined and not: the
    schedules with the loop programs equal the event-by-event ones."""
    rng = np.random.default_rng(1000 + seed)
    src, w, trips = _random_body(rng)
    k = jit(speed._user_kernels(src, nl=nl, nisa=nisa)["k"])
    tr = trace_of(k, np.zeros((128, w * trips), np.float32), numerics=False)[1]
    assert tr.loop_runs, src
    opt = [{}, {"middle_end": False}, {"place_engines": False}][int(rng.integers(0, 3))]
    written = 0
    for in_order in (False, True):
        opts = ModelOptions(**{**build_options(k), **opt, "serialise": in_order})
        full, steady, sc = _both(k, tr, opts, in_order=in_order)
        _assert_same(full, steady)
        written += sc.skipped
    assert written > 0, "the steady state wrote part of at least one of the two schedules"


def _union_loop(intervals) -> float:
    """The union length as a plain loop over the sorted intervals (the reference for schedule._union_length)."""
    total, cur = 0.0, None
    for s, e in sorted(intervals):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur is not None else 0.0)


@pytest.mark.parametrize("seed", range(4))
def test_the_dma_busy_time_is_the_union_of_the_transfers_summed_in_order(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    s = np.round(rng.uniform(0, 5000, n), int(rng.integers(0, 3)))  # rounded: equal starts, touching intervals
    e = s + np.round(rng.exponential(3.0, n), 1) * (rng.random(n) < 0.9)  # a tenth of zero length
    recs = [DmaTiming(0.0, 0.0, 0.0, a, b, 0, None, 0) for a, b in zip(s.tolist(), e.tolist(), strict=True)]
    got = _union_length(recs)
    assert got > 0
    assert got == _union_loop(zip(s.tolist(), e.tolist(), strict=True))  # the same float, bit for bit
    assert _union_length([]) == 0.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_dependency_pass_builds_the_pipelined_and_the_not_pipelined_dependencies(name):
    k, tr = _trace(name, *CASES[name])
    ev = list(tr.events)
    both = TraceFacts(ev, tr.loop_runs)
    both.memo[WANT_SERIALISED] = True
    got = []
    for serialise in (False, True):
        opts = ModelOptions(**{**build_options(k), "serialise": serialise})
        alone = build_dependencies(ev, opts, tr.alloc_origins, tr.alloc_names, HW, 0, set(), TraceFacts(ev))
        shared = build_dependencies(ev, opts, tr.alloc_origins, tr.alloc_names, HW, 0, set(), both)
        assert any(alone), "the trace has dependencies"
        assert shared == alone
        got.append(shared)
    # from one pass: where no tile rotates the two options share the list
    assert any(a is b and a for a, b in zip(*got, strict=True))


def test_no_gc_hands_what_it_kept_to_the_oldest_generation_and_cycles_are_still_collected():
    """trace.no_gc: the objects a block keeps (a trace's events) join the oldest generation on the way out, so the
    next young collection does not walk them; garbage cycles made inside are still collected."""
    import gc
    import weakref

    from nki_kernels.sim.core.trace import PROMOTE_KEPT, no_gc

    class Node:
        pass

    assert gc.isenabled()
    with no_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(PROMOTE_KEPT + 1000)]
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle, garbage once the names go
        probe = weakref.ref(a)
        del a, b
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept) in oldest and id(kept[-1]) in oldest
    assert probe() is not None  # (no collection ran yet)
    gc.collect()
    assert probe() is None
    with no_gc():  # a small block: its objects stay young, as without the block
        few = [[i] for i in range(10)]
    assert id(few) not in {id(o) for o in gc.get_objects(generation=2)}
