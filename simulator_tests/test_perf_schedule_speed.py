"""The scheduler's speed-ups move no estimate: a long loop's estimate and alternatives are pinned to the
values of the scheduler before them (bit for bit), the facts shared by the schedules of one estimate
give the schedules a fresh read gives, and sim-bench reports the scheduling rate.
scripts/estimate_identity.py checks every estimate the repository makes the same way."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nki_kernels.perf.hardware import get_hardware
from nki_kernels.perf.model import ModelOptions, estimate_trace, trace_of
from nki_kernels.perf.schedule import TraceFacts, build_dependencies, schedule
from nki_kernels.sim import speed
from nki_kernels.sim.nki01 import isa as nisa
from nki_kernels.sim.nki01 import language as nl
from nki_kernels.sim.nki01.kernel import jit

ADD_TILED = speed.VECTOR_ADD.format(name="add_tiled", op=speed.TENSOR_TENSOR_ADD)

MIXED = """
def mixed(x):
    out = nl.ndarray((4, 128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(x[i])
        p = nisa.nc_transpose(t)
        c = nl.copy(p)
        s = nl.multiply(c, 2.0)
        nl.store(out[i], value=s)
    return out
"""


@pytest.fixture(scope="module")
def add_tiled_trace():
    k = jit(speed._user_kernels(ADD_TILED, nl=nl, nisa=nisa)["add_tiled"])
    x = np.zeros(300, np.float32)
    return trace_of(k, x, x.copy(), numerics=False)[1]


# (latency_us, alternatives' latency_us) of the scheduler before the speed-ups (commit 15b03d4)
PINNED = [
    ({}, 179.41416666666666, [29.984375, 658.6499999999996]),
    ({"middle_end": False}, 508.365, [29.984375, 979.1149999999959]),
    ({"mode": "profile"}, 93.9175, [31.984375, 517.1650000000021]),
]


@pytest.mark.parametrize(("kw", "latency", "alts"), PINNED)
def test_a_long_loop_estimate_is_bit_identical_to_the_scheduler_before(add_tiled_trace, kw, latency, alts):
    """Event by event (the trace's loop programs not given to the scheduler): bit for bit.  With them the
    scheduler writes the iterations of a repeating state as x + k * delta (perf/steady.py), the same times
    to rounding: a relative 1e-12 here."""
    runs = add_tiled_trace.loop_runs
    try:
        add_tiled_trace.loop_runs = []
        e = estimate_trace(add_tiled_trace, options=ModelOptions(**kw), keep=False)
    finally:
        add_tiled_trace.loop_runs = runs
    assert e.latency_us == latency
    assert [a.latency_us for a in e.alternatives] == alts
    s = estimate_trace(add_tiled_trace, options=ModelOptions(**kw), keep=False)
    assert s.latency_us == pytest.approx(latency, rel=1e-12)
    assert [a.latency_us for a in s.alternatives] == pytest.approx(alts, rel=1e-12)


def _schedule_fields(s) -> tuple:
    return (
        s.start,
        s.end,
        s.engine_of,
        {k: (*v[:6], dataclasses.astuple(v.cost), v.dge) for k, v in s.dma.items()},
        s.busy_ns,
        s.makespan_ns,
        s.elided,
        s.reordered,
    )


def test_shared_facts_give_the_schedules_of_fresh_reads():
    k = jit(speed._user_kernels(MIXED, nl=nl, nisa=nisa)["mixed"])
    tr = trace_of(k, np.zeros((4, 128, 128), np.float32), numerics=False)[1]
    hw = get_hardware("trn2")
    events = list(tr.events)
    facts = TraceFacts(events)
    for opts in (
        ModelOptions(),
        ModelOptions(place_engines=False),
        ModelOptions(serialise=True),
        ModelOptions(window=1, fold_psum_zeros=False, hoist_transposes=False),
        ModelOptions(middle_end=False, skip_issue="serial"),
    ):
        shared = schedule(events, hw, opts, tr.alloc_origins, None, tr.alloc_names, facts=facts)
        fresh = schedule(list(tr.events), hw, opts, tr.alloc_origins, None, tr.alloc_names)
        assert _schedule_fields(shared) == _schedule_fields(fresh)
        assert build_dependencies(events, opts, tr.alloc_origins, tr.alloc_names, facts=facts) == fresh.deps


def test_facts_of_another_event_list_are_not_used(add_tiled_trace):
    events = list(add_tiled_trace.events)
    other = TraceFacts(events[:8])
    deps = build_dependencies(events, ModelOptions(), add_tiled_trace.alloc_origins, facts=other)
    assert len(deps) == len(events)


def test_sim_bench_reports_the_cost_model_scheduling_rate():
    n, secs, schedules = speed.cost_model_rate(64, repeat=1)
    assert n == 4 * 64
    assert secs > 0
    assert schedules == 3  # the modelled schedule, vectorised and not-pipelined loops


@pytest.mark.parametrize(
    "opts",
    [
        ModelOptions(serialise=True),
        ModelOptions(window=1),
        ModelOptions(window=1, mode="profile", middle_end=False, skip_issue="serial", place_engines=False),
    ],
)
@pytest.mark.parametrize("kernel", ["add_tiled", "mixed"])
def test_run_in_order_is_the_event_driven_schedule_with_a_window_of_one(add_tiled_trace, opts, kernel):
    from nki_kernels.perf.schedule import Scheduler

    if kernel == "add_tiled":
        tr = add_tiled_trace
    else:
        k = jit(speed._user_kernels(MIXED, nl=nl, nisa=nisa)["mixed"])
        tr = trace_of(k, np.zeros((4, 128, 128), np.float32), numerics=False)[1]
    hw = get_hardware("trn2")
    events = list(tr.events)
    deps = build_dependencies(events, opts, tr.alloc_origins, tr.alloc_names, hw)
    a = Scheduler(events, hw, opts, deps).run()
    b = Scheduler(events, hw, opts, deps).run_in_order()
    assert _schedule_fields(a) == _schedule_fields(b)
    assert list(a.dma) == list(b.dma) and a.issue_busy_ns == b.issue_busy_ns
    assert sorted(a.uncosted_ops.items()) == sorted(b.uncosted_ops.items())


def test_run_in_order_refuses_a_window(add_tiled_trace):
    from nki_kernels.perf.schedule import Scheduler

    events = list(add_tiled_trace.events)
    with pytest.raises(ValueError, match="window of 1"):
        Scheduler(events, get_hardware("trn2"), ModelOptions(), [[] for _ in events]).run_in_order()
