"""Trace-recording rules: what the instruction trace records for block-dimension
tiles, arange/mgrid views and `+=` on a view, and that every instruction passes the one recording
path (RunContext.record)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nki_kernels.sim import SimWarning, nisa, nki, nl, trace_kernel
from nki_kernels.sim.core.context import RunContext
from nki_kernels.sim.nki01 import compiler as ncc
from nki_kernels.sim.nki07 import isa as nisa7
from nki_kernels.sim.nki07 import language as nl7
from nki_kernels.sim.nki07 import nki as nki7
from nki_kernels.sim.nki07.kernel import trace as trace07

F32 = np.float32
X = np.random.default_rng(0).standard_normal((128, 64)).astype(F32)


def test_block_dimension_tile_records_its_partition_axis():
    @nki.jit
    def k(a):
        t = nl.zeros((4, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)
        return a

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)
        _, tr = trace_kernel(k, X)
    (ev,) = [e for e in tr.events if e.op == "memset"]
    assert ev.partitions == 128 and ev.free_elems == 4 * 64


@pytest.mark.parametrize("view,strided", [("identity", False), ("every_fifth", True), ("basic", False)])
def test_mgrid_identity_view_is_not_strided(view, strided):
    @nki.jit
    def k(a):
        t = nl.load(a)
        i = nl.mgrid[0:128, 0:12]
        if view == "identity":
            v = t[i.p, i.x]
        elif view == "every_fifth":
            v = t[i.p, 5 * i.x]  # a 20-byte step: strided
        else:
            v = t[:, 0:12]
        nisa.tensor_copy(v)
        return a

    _, tr = trace_kernel(k, X)
    (ev,) = [e for e in tr.events if e.op == "tensor_copy"]
    assert ev.payload.strided is strided


def test_view_accumulate_records_no_extra_copy():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.load(a)
        i = nl.mgrid[0:128, 0:64]
        t[i.p, i.x] += u
        nl.store(out, t)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)  # `+=` outside PSUM accumulation
        out, tr = trace_kernel(k, X)
    np.testing.assert_allclose(out, 2 * X, rtol=1e-6)
    ops = [e.op for e in tr.events]
    assert ops.count("tensor_copy") == 0 and ops.count("tensor_tensor") == 1, ops


def test_every_instruction_passes_the_one_recording_path(monkeypatch):
    seen = []
    orig = RunContext.record

    def spy(self, op, *a, **kw):
        seen.append(op)
        return orig(self, op, *a, **kw)

    monkeypatch.setattr(RunContext, "record", spy)

    @nki.jit
    def k(a):
        out = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)  # dma_copy
        m = nisa.nc_matmul(t[:, 0:64], t)  # nc_matmul
        c = nisa.tensor_copy(m)  # tensor_copy
        r = nisa.tensor_scalar(c, np.multiply, 2.0)  # tensor_scalar
        z = nl.zeros((64, 64), nl.float32)  # memset
        z[...] = nisa.nc_transpose(r)  # nc_transpose + eviction copy
        nl.store(out, nl.add(z, r))  # tensor_tensor + dma_copy
        return out

    _, tr = trace_kernel(k, X)
    # one call per event (a result that waits for its destination is recorded when it lands, in the
    # trace position reserved when it ran: the trace stays in program order)
    assert sorted(seen) == sorted(e.op for e in tr.events) and [e.seq for e in tr.events] == list(range(len(seen)))
    assert {"dma_copy", "nc_matmul", "tensor_copy", "tensor_scalar", "memset", "nc_transpose", "tensor_tensor"} <= set(
        seen
    )


def test_every_isa_instruction_is_registered_once_with_its_name():
    from nki_kernels.sim import isa

    assert {
        "nc_matmul",
        "tensor_tensor",
        "tensor_scalar",
        "tensor_reduce",
        "activation",
        "dma_copy",
        "tensor_copy",
        "nc_transpose",
        "memset",
        "iota",
    } <= set(isa.INSTRUCTIONS)
    for name, fn in isa.INSTRUCTIONS.items():
        assert getattr(isa, name) is fn and fn.__name__ == name
    with pytest.raises(RuntimeError, match="E019"):  # the decorator supplies the context
        isa.tensor_copy(None)


def test_every_event_carries_its_enclosing_loops_as_typed_frames():
    from nki_kernels.sim.trace import LoopFrame, LoopKind

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        for i in nl.affine_range(2):  # LOOP_A
            for j in nl.sequential_range(3):  # LOOP_S
                # a new tile per iteration (rebinding `t` here and storing it after the loops is E027;
                # writing it in place across affine iterations is E029)
                nisa.tensor_scalar(t, nl.multiply, 1.0)
        nl.store(out, t)
        return out

    _, tr = trace_kernel(k, np.ones((128, 4), np.float32))
    body = [e for e in tr.events if e.op == "tensor_scalar"]
    assert len(body) == 6 and tr.events[0].loops == () and tr.events[-1].loops == ()
    src = open(__file__).read().splitlines()
    line_a = next(i + 1 for i, s in enumerate(src) if s.endswith("# LOOP_A"))
    line_s = next(i + 1 for i, s in enumerate(src) if s.endswith("# LOOP_S"))
    outer, inner = body[4].loops
    assert isinstance(outer, LoopFrame) and outer.kind is LoopKind.AFFINE and outer.kind == "affine"
    assert (outer.iteration, outer.trip_count, outer.line) == (1, 2, line_a)
    assert (inner.kind, inner.iteration, inner.trip_count, inner.line) == (LoopKind.SEQUENTIAL, 1, 3, line_s)
    # one loop id per entry into a loop statement: the inner loop is entered twice
    assert len({e.loops[0].loop_id for e in body}) == 1
    assert len({e.loops[1].loop_id for e in body}) == 2


def test_the_trace_records_what_the_kernel_pinned_and_placed() -> None:
    """Event.engine_given (the call named its engine) and Trace.placed_allocs (the kernel placed the tensor with
    ncc.sbuf.alloc / NKI 0.7 address=): the cost model's compiler reads these facts, not the kernel's source."""

    @nki.jit
    def k01(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        free = nisa.tensor_copy(t)
        pinned = nisa.tensor_copy(free, engine=nisa.vector_engine)
        nl.store(out, pinned)
        return out

    x = np.ones((128, 64), np.float32)
    _, tr = trace_kernel(k01, x)
    copies = [ev for ev in tr.events if ev.op == "tensor_copy"]
    assert [ev.engine_given for ev in copies] == [False, True]

    @nki.jit
    @nki.compiler.skip_middle_end_transformations
    def placed(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(1,)))
        buf[...] = nl.load(a)
        nl.store(out, buf)
        return out

    _, tr = trace_kernel(placed, x)
    load = next(ev for ev in tr.events if ev.op == "dma_copy" and ev.writes[0].buffer.value == "sbuf")
    assert tr.placed_allocs == {load.writes[0].alloc_id}

    @nki7.jit
    def k07(a):
        out = nl7.ndarray(a.shape, nl7.float32, buffer=nl7.shared_hbm)
        t = nl7.ndarray(a.shape, nl7.float32, buffer=nl7.sbuf, address=(0, 0))
        nisa7.dma_copy(dst=t, src=a)
        u = nl7.ndarray(a.shape, nl7.float32, buffer=nl7.sbuf)
        nisa7.tensor_copy(dst=u, src=t, engine=nisa7.scalar_engine)
        nisa7.dma_copy(dst=out, src=u)
        return out

    _, tr = trace07(k07, x)
    assert [ev.engine_given for ev in tr.events if ev.op == "tensor_copy"] == [True]
    assert len(tr.placed_allocs) == 1
