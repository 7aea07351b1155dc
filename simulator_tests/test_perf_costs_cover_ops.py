"""Every instruction the interpreter records (sim/core/trace.py IsaOp) has a cost decision: a rule in the cost
table, or the generic elementwise rule taken on purpose (perf/costs.py GENERIC_COST, reported as uncosted); and
the interpreter records no instruction IsaOp does not name."""

from __future__ import annotations

import numpy as np
import pytest

from nki_kernels.perf.costs import COMPUTE_COSTS, GENERIC_COST, compute_cost_ns, dma_cost
from nki_kernels.perf.hardware import get_hardware
from nki_kernels.perf.model import trace_of
from nki_kernels.sim.core.trace import COMPUTE_OPS, DMA_OPS, Engine, IsaOp
from nki_kernels.sim.nki01 import language as nl
from nki_kernels.sim.nki01.kernel import jit


def test_every_compute_instruction_has_a_cost_decision():
    missing = sorted(op for op in COMPUTE_OPS if op not in COMPUTE_COSTS and op not in GENERIC_COST)
    assert not missing, f"instructions with no cost rule and no GENERIC_COST entry: {missing}"
    assert not set(COMPUTE_COSTS) & set(GENERIC_COST), "an instruction is in both tables"
    assert not (set(COMPUTE_COSTS) | set(GENERIC_COST)) - COMPUTE_OPS, "a cost for an instruction never recorded"
    assert not COMPUTE_OPS & DMA_OPS and COMPUTE_OPS | DMA_OPS == set(IsaOp)
    assert all(type(k) is IsaOp for k in (*COMPUTE_COSTS, *GENERIC_COST)), "the cost table is keyed by IsaOp"
    assert IsaOp.NC_MATMUL == "nc_matmul" and COMPUTE_COSTS["nc_matmul"] is COMPUTE_COSTS[IsaOp.NC_MATMUL]
    assert f"{IsaOp.DMA_COPY}" == str(IsaOp.DMA_COPY) == "dma_copy"


def _copy_trace():
    @jit
    def k(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.exp(nl.load(a)))
        return out

    return trace_of(k, np.zeros((128, 64), np.float32))[1]


def test_the_recorded_instructions_cost_as_their_table_says():
    hw = get_hardware("trn2")
    tr = _copy_trace()
    assert {ev.op for ev in tr.events} == {"dma_copy", "activation"}
    for ev in tr.events:
        if ev.engine is Engine.DMA:
            assert ev.op in DMA_OPS
            assert dma_cost(ev, hw, "hwdge").ring_ns > 0
        else:
            ns, known = compute_cost_ns(ev, hw)
            assert ns > 0 and known == (ev.op in COMPUTE_COSTS)
    ev = next(e for e in tr.events if e.op == "activation")
    ns, known = compute_cost_ns(ev._replace(op="max8"), hw)  # a GENERIC_COST instruction: costed, reported
    assert ns > 0 and not known


def test_the_interpreter_refuses_to_record_an_instruction_it_does_not_list():
    from nki_kernels.sim.core.context import RunContext
    from nki_kernels.sim.core.options import SimOptions

    ctx = RunContext(SimOptions())
    with pytest.raises(AssertionError, match="does not list: made_up_op"):
        ctx.record("made_up_op", "nisa.made_up_op", Engine.DVE)
