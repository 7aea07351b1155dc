"""``nisa.sendrecv`` between the cores of an LNC=2 launch and ``nki.collectives`` over ranks run in one process
(nki_kernels/sim/nki07/collectives.py; sources: aws-neuron-sdk 81ce03ae nki/api/nki/collectives/__init__.py and
nki/api/nki/isa/__init__.py ``sendrecv``).  Small kernels against NumPy references; each error has its bad form
(the coded error) and its fixed twin (runs)."""

from __future__ import annotations

import numpy as np
import pytest

from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki
from nki_kernels.sim.nki07.collectives import run_ranks

ncc = nki.collectives
ReplicaGroup = ncc.ReplicaGroup
RNG = np.random.default_rng(29)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for v in ("NKI_COMPILER_FRONTEND", "NEURON_LOGICAL_NC_CONFIG", "NEURON_CC_FLAGS"):
        monkeypatch.delenv(v, raising=False)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check(out, ref, rtol=1e-6, atol=0.0):
    out = np.asarray(out, dtype=np.float64)
    assert out.shape == np.shape(ref)
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


# ---- nisa.sendrecv ------------------------------------------------------------------------------------------------
def _swap_kernel(
    send_to=lambda me: 1 - me,
    src_buffer=None,
    dst_dtype=None,
    dst_cols=None,
    engine=None,
    skip_core=-1,
    pipe=0,
):
    """Each core loads its half of the rows of ``a`` (P, 2F), exchanges it and writes what it received at the
    other core's rows of ``out``."""
    kw = {} if engine is None else {"dma_engine": engine}

    @nki.jit
    def k(a):
        P, F2 = a.shape
        F = F2 // 2
        me = nl.program_id(0)
        out = nl.ndarray((P, F2), dtype=a.dtype, buffer=nl.shared_hbm)
        mine = nl.ndarray((P, F), dtype=a.dtype, buffer=src_buffer or nl.sbuf)
        nisa.dma_copy(dst=mine, src=a[:, me * F : (me + 1) * F])
        got = nl.ndarray((P, dst_cols or F), dtype=dst_dtype or a.dtype, buffer=nl.sbuf)
        if me != skip_core:
            p = me if pipe == -1 else pipe  # -1: each core its own pipe
            nisa.sendrecv(src=mine, dst=got, send_to_rank=send_to(me), recv_from_rank=send_to(me), pipe_id=p, **kw)
        else:
            nisa.memset(dst=got, value=0.0)
        nisa.dma_copy(dst=out[:, (1 - me) * F : (2 - me) * F], src=got[:, 0:F])
        return out

    return k


def test_sendrecv_exchanges_between_the_two_cores():
    """Each core receives the other core's src: out[:, other half] = the other core's half = a (both halves)."""
    a = rand(8, 16)
    check(_swap_kernel()[2](a), a)


def test_sendrecv_doc_ring_pattern_and_pipe_order():
    """The page's example (next = (me + 1) % 2, prev = (me - 1) % 2) twice on one pipe;
    the second exchange sends back what the first received, so each core ends with its own data plus 1."""

    @nki.jit
    def k(a):
        me = nl.program_id(0)
        P, F = a.shape
        out = nl.ndarray((2, P, F), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.tensor_scalar(dst=x, data=x, op0=nl.add, operand0=float(1))
        nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=me + 1.0)  # core c holds (a + 1) * (c + 1)
        y = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=x, dst=y, send_to_rank=(me + 1) % 2, recv_from_rank=(me - 1) % 2, pipe_id=0)
        z = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=y, dst=z, send_to_rank=(me + 1) % 2, recv_from_rank=(me - 1) % 2, pipe_id=0)
        nisa.dma_copy(dst=out[me], src=z)
        return out

    a = rand(4, 8)
    out = k[2](a)
    check(out, np.stack([(a + 1) * 1, (a + 1) * 2]), rtol=1e-6)


def test_sendrecv_two_core_all_reduce_int():
    """nki-library indexed_flatten's pattern: exchange, then an elementwise max of own and received (int32)."""

    @nki.jit
    def k(a):
        me = nl.program_id(0)
        out = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.shared_hbm)
        mine = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=a[me])
        other = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=other, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        both = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=both, data1=mine, data2=other, op=nl.maximum)
        if me == 0:
            nisa.dma_copy(dst=out, src=both)
        return out

    a = RNG.integers(-1000, 1000, size=(2, 16, 4), dtype=np.int32)
    out = k[2](a)
    assert out.dtype == np.int32 and np.any(out != 0)
    np.testing.assert_array_equal(out, np.maximum(a[0], a[1]))


@pytest.mark.parametrize(
    "bad, fixed, exc, code",
    [
        (dict(src_buffer=nl.shared_hbm), {}, TypeError, "E007"),  # "src and dst tiles must both be in SBUF"
        (dict(dst_dtype=nl.bfloat16), {}, TypeError, "E009"),  # "must have the same data type"
        (dict(dst_cols=16), {}, ValueError, "E011"),  # "must have the same shape"
        (dict(send_to=lambda me: 2), {}, ValueError, "E011"),  # "must be either 0 or 1"
        # gpsimd_dma: at most 1024 bytes per partition of a 32-bit type (8 x 4 B fits, 512 x 4 B does not)
        (dict(engine=nisa.dma_engine.gpsimd_dma), dict(engine=nisa.dma_engine.dma), ValueError, "E011"),
        # core 1 never sends: core 0 would wait for ever on hardware
        (dict(skip_core=1), {}, RuntimeError, "E032"),
        # core c sends on pipe c: the two pipes never meet
        (dict(pipe=-1), {}, RuntimeError, "E032"),
    ],
)
def test_sendrecv_errors_and_fixed_twins(bad, fixed, exc, code):
    a = rand(8, 1024)
    with pytest.raises(exc, match=rf"\[{code}\]"):
        _swap_kernel(**bad)[2](a)
    check(_swap_kernel(**fixed)[2](a), a)


def test_sendrecv_to_itself_copies():
    """send_to_rank = recv_from_rank = the core itself (the page allows 0 or 1 for either): dst gets src."""

    @nki.jit
    def k(a):
        me = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[me])
        y = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=x, dst=y, send_to_rank=me, recv_from_rank=me, pipe_id=3)
        nisa.dma_copy(dst=out[me], src=y)
        return out

    a = rand(2, 4, 8)
    check(k[2](a), a)


def test_sendrecv_needs_an_lnc2_launch():
    """The page: sendrecv is allowed only with LNC enabled; on an LNC=1 launch there is no core 1 (E011).  Twin:
    the same kernel as kernel[2]."""
    a = rand(8, 16)
    with pytest.raises(ValueError, match=r"\[E011\].*this launch has 1 core"):
        _swap_kernel()[1](a)
    check(_swap_kernel()[2](a), a)


def test_sendrecv_event_is_a_dma_the_cost_model_estimates():
    """One DMA event per sendrecv (op 'sendrecv', the tile's bytes); the cost model estimates the kernel."""
    from nki_kernels.perf.model import estimate

    a = rand(8, 16)
    _, trace = nki.trace(_swap_kernel()[2], a)
    ev = [e for e in trace.events if e is not None and e.op == "sendrecv"]
    assert len(ev) == 2 and all(str(e.engine) == "DMA" and e.bytes == 8 * 8 * 4 for e in ev)
    est = estimate(_swap_kernel()[2], a)
    assert np.isfinite(est.latency_us) and est.latency_us > 0


# ---- nki.collectives over ranks ---------------------------------------------------------------------------------
@nki.jit
def _all_reduce_hbm(x, rg, op):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=op)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_all_reduce_sums_the_ranks(lnc):
    xs = [rand(16, 32) for _ in range(4)]
    rg = ReplicaGroup([[0, 1, 2, 3]])
    outs = run_ranks(_all_reduce_hbm, [dict(x=x, rg=rg, op=nl.add) for x in xs], lnc=lnc)
    ref = (xs[0].astype(np.float32) + xs[1] + xs[2] + xs[3]).astype(np.float32)
    for o in outs:
        check(o, ref, rtol=1e-6)


def test_all_reduce_within_each_rank_list_sbuf_max():
    """Two rank-lists reduce independently; SBUF tensors; op maximum."""

    @nki.jit
    def k(x, rg):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_reduce(srcs=[a], dsts=[b], replica_group=rg, op=nl.maximum)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        return out

    xs = [rand(8, 8) for _ in range(4)]
    rg = ReplicaGroup([[0, 2], [1, 3]])
    outs = run_ranks(k, [dict(x=x, rg=rg) for x in xs])
    check(outs[0], np.maximum(xs[0], xs[2]))
    check(outs[2], np.maximum(xs[0], xs[2]))
    check(outs[1], np.maximum(xs[1], xs[3]))
    check(outs[3], np.maximum(xs[1], xs[3]))


def test_all_gather_hbm_dim0_and_sbuf_dim1():
    @nki.jit
    def k(x, rg):
        H, W = x.shape
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        g0 = nl.ndarray((3 * H, W), dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather(srcs=[src], dsts=[g0], replica_group=rg, collective_dim=0)
        t = nl.ndarray((H, W), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        g1 = nl.ndarray((H, 3 * W), dtype=x.dtype, buffer=nl.sbuf)
        ncc.all_gather(srcs=[t], dsts=[g1], replica_group=rg, collective_dim=1)
        o0 = nl.ndarray((3 * H, W), dtype=x.dtype, buffer=nl.shared_hbm)
        o1 = nl.ndarray((H, 3 * W), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o0, src=g0)
        nisa.dma_copy(dst=o1, src=g1)
        return o0, o1

    xs = [rand(4, 6) for _ in range(3)]
    rg = ReplicaGroup([[2, 0, 1]])  # rank-list order decides the concatenation order
    outs = run_ranks(k, [dict(x=x, rg=rg) for x in xs])
    for o0, o1 in outs:
        check(o0, np.concatenate([xs[2], xs[0], xs[1]], axis=0))
        check(o1, np.concatenate([xs[2], xs[0], xs[1]], axis=1))


def test_reduce_scatter_and_all_to_all():
    @nki.jit
    def k(x, rg):
        H, W = x.shape
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        rs = nl.ndarray((H // 2, W), dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.reduce_scatter(srcs=[src], dsts=[rs], replica_group=rg, collective_dim=0, op=nl.add)
        a2a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_to_all(srcs=[src], dsts=[a2a], replica_group=rg, collective_dim=0)
        o1 = nl.ndarray((H // 2, W), dtype=x.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=rs)
        nisa.dma_copy(dst=o2, src=a2a)
        return o1, o2

    xs = [rand(8, 4) for _ in range(2)]
    rg = ReplicaGroup([[0, 1]])
    outs = run_ranks(k, [dict(x=x, rg=rg) for x in xs], lnc=2)
    total = xs[0] + xs[1]
    for r, (rs, a2a) in enumerate(outs):
        check(rs, total[4 * r : 4 * r + 4], rtol=1e-6)
        check(a2a, np.concatenate([xs[0][4 * r : 4 * r + 4], xs[1][4 * r : 4 * r + 4]]))


def test_rank_id_and_collective_permute():
    @nki.jit
    def k(x, table):
        r = ncc.rank_id()
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=dst, src=x)
        ncc.collective_permute(srcs=[src], dsts=[dst], source_target_pairs=[(0, 1), (1, 2), (2, 0)])
        nisa.dma_copy(dst=out, src=dst)
        mine = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(
            dst=mine, src=table.ap(pattern=[[x.shape[1], 1], [1, x.shape[1]]], scalar_offset=r, indirect_dim=0)
        )
        return out, mine

    xs = [rand(4, 4) for _ in range(3)]
    table = rand(3, 4)
    outs = run_ranks(k, [dict(x=x, table=table) for x in xs])
    for r, (o, mine) in enumerate(outs):
        check(o, xs[(r - 1) % 3])
        check(mine, table[r : r + 1])


def test_ring_permute_implicit_reduce_and_processing_rank():
    """Ring of 3: every rank receives its predecessor's src (and op(src0, src1) for the reduce form); the
    processing rank of iteration i is i positions back along the ring."""

    @nki.jit
    def k(x, rg):
        H, W = x.shape
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=a, src=x)
        got = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.collective_permute_implicit(srcs_by_channel=[[a]], dsts_by_channel=[[got]], replica_group=rg)
        red = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.collective_permute_implicit_reduce(
            srcs0_by_channel=[[a]], srcs1_by_channel=[[got]], dsts_by_channel=[[red]], replica_group=rg, op=nl.add
        )
        ids = nl.ndarray((1, 3), dtype=nl.int32, buffer=nl.sbuf)
        for i in range(3):
            reg = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=i, replica_group=rg)
            nisa.register_store(ids[0:1, i : i + 1], reg)
        o1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((1, 3), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=got)
        nisa.dma_copy(dst=o2, src=red)
        nisa.dma_copy(dst=o3, src=ids)
        return o1, o2, o3

    xs = [rand(4, 4) for _ in range(3)]
    rg = ReplicaGroup([[0, 1, 2]])
    outs = run_ranks(k, [dict(x=x, rg=rg) for x in xs])
    for r, (got, red, ids) in enumerate(outs):
        p, pp = (r - 1) % 3, (r - 2) % 3
        check(got, xs[p])
        check(red, xs[p] + xs[pp], rtol=1e-6)  # the predecessor's a + its got (= its predecessor's a)
        np.testing.assert_array_equal(ids, [[r, p, pp]])


def test_one_rank_run_without_run_ranks():
    """A plain call is rank 0 of one rank: a one-rank group works, rank_id() is 0."""
    x = rand(4, 4)
    check(_all_reduce_hbm(x, ReplicaGroup([[0]]), nl.add), x)


def test_collective_event_is_a_dma_the_cost_model_estimates():
    from nki_kernels.perf.model import estimate

    x = rand(4, 4)
    _, trace = nki.trace(_all_reduce_hbm, x, ReplicaGroup([[0]]), nl.add)
    ev = [e for e in trace.events if e is not None and e.op == "all_reduce"]
    assert len(ev) == 1 and str(ev[0].engine) == "DMA" and ev[0].bytes == 4 * 4 * 4
    est = estimate(_all_reduce_hbm, x, ReplicaGroup([[0]]), nl.add)
    assert np.isfinite(est.latency_us) and est.latency_us > 0


# ---- collective errors: bad form, fixed twin -------------------------------------------------------------------
def test_replica_group_overlap_is_an_error():
    with pytest.raises(ValueError, match=r"\[E011\].*rank 1 is in rank-list 0 and rank-list 1"):
        ReplicaGroup([[0, 1], [1, 2]])
    assert ReplicaGroup([[0, 1], [2, 3]]).replica_groups == [[0, 1], [2, 3]]
    with pytest.raises(TypeError, match=r"\[E010\]"):
        ReplicaGroup([[0, "1"]])


def test_group_larger_than_the_run_is_an_error():
    x = rand(4, 4)
    with pytest.raises(ValueError, match=r"\[E011\].*this run has 1 rank.*run_ranks"):
        _all_reduce_hbm(x, ReplicaGroup([[0, 1]]), nl.add)
    outs = run_ranks(_all_reduce_hbm, [dict(x=x, rg=ReplicaGroup([[0, 1]]), op=nl.add)] * 2)
    check(outs[1], 2 * x)


def test_the_error_of_a_rank_is_raised_with_a_note_naming_it():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    x = rand(4, 4)
    with pytest.raises(ValueError, match=r"\[E018\].*float64") as e:
        run_ranks(k, [dict(x=x), dict(x=x.astype(np.float64))])
    # BaseException.add_note exists from Python 3.11: on 3.10 the rank's error is raised without the note (it raised
    # AttributeError there)
    assert getattr(e.value, "__notes__", ["(in rank 1 of 2)"]) == ["(in rank 1 of 2)"]
    check(run_ranks(k, [dict(x=x), dict(x=x)])[1], x)


def test_reduction_op_must_be_add_min_max():
    x = rand(4, 4)
    with pytest.raises(ValueError, match=r"\[E021\].*multiply"):
        _all_reduce_hbm(x, ReplicaGroup([[0]]), nl.multiply)
    check(_all_reduce_hbm(x, ReplicaGroup([[0]]), nl.minimum), x)


def _gather_kernel(buffer_src, buffer_dst, dim, kind="all_gather"):
    @nki.jit
    def k(x, rg):
        H, W = x.shape
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=buffer_src)
        nisa.dma_copy(dst=src, src=x)
        shape = (2 * H, W) if dim == 0 else (H, 2 * W)
        if kind == "all_to_all":
            shape = x.shape
        g = nl.ndarray(shape, dtype=x.dtype, buffer=buffer_dst)
        getattr(ncc, kind)(srcs=[src], dsts=[g], replica_group=rg, collective_dim=dim)
        out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=g)
        return out

    return k


@pytest.mark.parametrize(
    "bad, fixed, exc, code",
    [
        # "mixing memory spaces is not supported"
        ((nl.shared_hbm, nl.sbuf, 0), (nl.sbuf, nl.sbuf, 0), TypeError, "E007"),
        # "Currently only 0 is supported for HBM tensors"
        ((nl.shared_hbm, nl.shared_hbm, 1), (nl.sbuf, nl.sbuf, 1), ValueError, "E011"),
        # all_to_all: "Tensors must reside on HBM"
        ((nl.sbuf, nl.sbuf, 0, "all_to_all"), (nl.shared_hbm, nl.shared_hbm, 0, "all_to_all"), TypeError, "E007"),
    ],
)
def test_collective_argument_errors_and_fixed_twins(bad, fixed, exc, code):
    xs = [rand(4, 4) for _ in range(2)]
    rg = ReplicaGroup([[0, 1]])
    with pytest.raises(exc, match=rf"\[{code}\]"):
        run_ranks(_gather_kernel(*bad), [dict(x=x, rg=rg) for x in xs])
    outs = run_ranks(_gather_kernel(*fixed), [dict(x=x, rg=rg) for x in xs])
    assert all(np.all(np.isfinite(o)) and np.any(o != 0) for o in outs)


def test_ranks_calling_different_collectives_or_skipping_one():
    """Rank 1 skips the collective (E032: rank 0 would wait for ever); ranks calling different collectives at the
    same point (E011).  Twin: every rank calls it."""

    @nki.jit
    def k(x, rg, skip, other):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=dst, src=x)
        if not skip:
            op = nl.maximum if other else nl.add
            ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=op)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    x = rand(4, 4)
    rg = ReplicaGroup([[0, 1]])
    with pytest.raises(RuntimeError, match=r"\[E032\].*rank 0 waits in all_reduce for rank\(s\) \[1\]") as ei:
        run_ranks(k, [dict(x=x, rg=rg, skip=False, other=False), dict(x=x, rg=rg, skip=True, other=False)])
    assert "already returned" in str(ei.value)
    with pytest.raises(ValueError, match=r"\[E011\].*rank 1 calls all_reduce\(op=maximum"):
        run_ranks(k, [dict(x=x, rg=rg, skip=False, other=False), dict(x=x, rg=rg, skip=False, other=True)])
    outs = run_ranks(k, [dict(x=x, rg=rg, skip=False, other=False)] * 2)
    check(outs[0], 2 * x)


def test_a_rank_outside_the_group_does_not_take_part():
    """ReplicaGroup page: the set of ranks the collective is executed on; rank 2 is in none, keeps its dst."""
    xs = [rand(4, 4) for _ in range(3)]
    rg = ReplicaGroup([[0, 1]])

    @nki.jit
    def k(x, rg):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=dst, src=x)
        ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=rg, op=nl.add)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    outs = run_ranks(k, [dict(x=x, rg=rg) for x in xs])
    check(outs[0], xs[0] + xs[1], rtol=1e-6)
    check(outs[2], xs[2])


def test_run_ranks_input_errors():
    with pytest.raises(ValueError, match=r"\[E011\] run_ranks\(inputs\)"):
        run_ranks(_all_reduce_hbm, {"x": rand(4, 4)})
    with pytest.raises(ValueError, match=r"\[E011\] run_ranks\(inputs\)"):
        run_ranks(_all_reduce_hbm, [])
