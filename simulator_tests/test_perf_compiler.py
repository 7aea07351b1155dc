"""What the compiler does before the engines run (nki_kernels.perf.compiler) and how the scheduler
applies it, on tiny synthetic traces whose timelines are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from nki_kernels.perf import TRN2, ModelOptions
from nki_kernels.perf.compiler import (
    candidates,
    place_engines,
    redundant_loads,
    sbuf_spill,
    vectorisable_loops,
)
from nki_kernels.perf.costs import compute_cost_ns
from nki_kernels.perf.schedule import build_dependencies, schedule
from nki_kernels.sim.trace import Buffer, Dma, Elementwise, Event, LoopFrame, LoopKind, Region

pytestmark = pytest.mark.perf


def _ev(
    seq,
    op,
    engine,
    api,
    reads=(),
    writes=(),
    P=128,
    N=512,
    payload=None,
    nbytes=0,
    loops=(),
    file="/x/k.py",
    line=None,
    dt="float32",
):
    if payload is None:
        payload = Elementwise("copy", N, 1, False, False, False, False, False)
    return Event(
        seq=seq,
        op=op,
        api=api,
        engine=engine,
        partitions=P,
        free_elems=N,
        in_shapes=((P, N),),
        out_shape=(P, N),
        in_dtypes=(dt,),
        out_dtype=dt,
        bytes=nbytes,
        flops=0,
        reads=tuple(reads),
        writes=tuple(writes),
        payload=payload,
        file=file,
        line=line if line is not None else 10 + seq,
        program_id=(),
        loops=tuple(loops),
    )


def _load(seq, src, dst, lo=0, hi=128 * 2048, api="nl.load", P=128, loops=()):
    return _ev(
        seq,
        "dma_copy",
        "DMA",
        api,
        reads=[Region(src, Buffer.HBM, lo, hi)],
        writes=[Region(dst, Buffer.SBUF, 0, (hi - lo) // P)],
        P=P,
        N=(hi - lo) // P // 4,
        nbytes=hi - lo,
        payload=Dma(Buffer.HBM, Buffer.SBUF, P, (hi - lo) // P, 0, False, False, False),
        loops=loops,
    )


def _store(seq, src, dst, nbytes=128 * 2048):
    return _ev(
        seq,
        "dma_copy",
        "DMA",
        "nl.store",
        reads=[Region(src, Buffer.SBUF, 0, nbytes // 128)],
        writes=[Region(dst, Buffer.HBM, 0, nbytes)],
        nbytes=nbytes,
        payload=Dma(Buffer.SBUF, Buffer.HBM, 128, nbytes // 128, 0, False, False, False),
    )


# ---- redundant nl.load elimination ------------------------------------------------------------


def test_a_repeated_load_of_unchanged_bytes_is_served_from_sbuf():
    # two loads of the same 256 KiB of HBM tensor 1 (2 KiB per partition): the second is elided
    evs = [_load(0, 1, 10), _load(1, 1, 11)]
    assert redundant_loads(evs, 4096) == {1: 0}
    # a different slice, a different tensor: no
    assert redundant_loads([_load(0, 1, 10), _load(1, 1, 11, lo=128 * 2048, hi=2 * 128 * 2048)], 4096) == {}
    assert redundant_loads([_load(0, 1, 10), _load(1, 2, 11)], 4096) == {}


def test_a_store_to_the_tensor_or_too_much_loading_in_between_defeats_the_reuse():
    # a store into tensor 1 between the loads: the bytes may have changed
    assert redundant_loads([_load(0, 1, 10), _store(1, 10, 1), _load(2, 1, 11)], 4096) == {}
    # 2 KiB/partition loaded in between (tensor 2): within a 2 KiB budget yes, within 1 KiB no
    evs = [_load(0, 1, 10), _load(1, 2, 12), _load(2, 1, 11)]
    assert redundant_loads(evs, 2048) == {2: 0}
    assert redundant_loads(evs, 1024) == {}


def test_only_nl_load_is_reused_an_explicit_dma_copy_is_always_performed():
    evs = [_load(0, 1, 10, api="nisa.dma_copy"), _load(1, 1, 11, api="nisa.dma_copy")]
    assert redundant_loads(evs, 1 << 20) == {}


def test_the_scheduler_elides_the_repeat_and_skips_it_for_a_skip_middle_end_build():
    # profile mode (one static queue, 50 ns per trigger), 128 x 2 KiB loads: the second one costs
    # nothing and completes when the first does; its reader waits for the first load's data
    evs = [
        _load(0, 1, 10),
        _load(1, 1, 11),
        _ev(
            2,
            "tensor_copy",
            "DVE",
            "nisa.tensor_copy",
            reads=[Region(11, Buffer.SBUF, 0, 2048)],
            writes=[Region(20, Buffer.SBUF, 0, 2048)],
        ),
    ]
    s = schedule(evs, TRN2, ModelOptions(mode="profile", place_engines=False))
    assert s.elided == {1: 0}
    assert 1 not in s.dma and s.end[1] == pytest.approx(s.end[0])
    assert s.start[2] >= s.end[0]
    kept = schedule(evs, TRN2, ModelOptions(mode="profile", place_engines=False, middle_end=False))
    assert kept.elided == {} and 1 in kept.dma
    assert kept.dma[1].issue_start == pytest.approx(50)  # behind the first trigger


# ---- engine placement -------------------------------------------------------------------------


def test_copies_without_an_engine_are_balanced_over_vector_and_scalar():
    # two independent 512-element fp32 copies recorded on VectorE by an nl.* op (no engine=):
    # VectorE costs (512 + 60) / 0.96 = 596 ns, ScalarE (512 + 60) / 1.2 = 477 ns.  The first goes
    # to ScalarE (0 + 477 < 0 + 596), the second to VectorE (596 < 477 + 477): they run in parallel.
    a = _ev(
        0,
        "tensor_copy",
        "DVE",
        "nl.copy",
        reads=[Region(1, Buffer.SBUF, 0, 2048)],
        writes=[Region(2, Buffer.SBUF, 0, 2048)],
    )
    b = _ev(
        1,
        "tensor_copy",
        "DVE",
        "nl.copy",
        reads=[Region(3, Buffer.SBUF, 0, 2048)],
        writes=[Region(4, Buffer.SBUF, 0, 2048)],
    )
    cost = lambda ev, e: compute_cost_ns(ev, TRN2, e)[0]  # noqa: E731
    assert cost(a, "DVE") == pytest.approx(572 / 0.96) and cost(a, "ACT") == pytest.approx(572 / 1.2)
    assert place_engines([a, b], cost) == ["ACT", "DVE"]
    s = schedule([a, b], TRN2, ModelOptions(mode="profile"))
    assert s.engine_of == ["ACT", "DVE"]
    assert s.makespan_ns == pytest.approx(572 / 0.96)  # the VectorE copy ends last
    fixed = schedule([a, b], TRN2, ModelOptions(mode="profile", place_engines=False))
    assert fixed.makespan_ns == pytest.approx(2 * 572 / 0.96)  # both on VectorE, one after the other


def test_only_ops_the_compiler_may_move_are_moved():
    auto = _ev(0, "tensor_copy", "DVE", "nisa.tensor_copy")
    given = _ev(1, "tensor_copy", "DVE", "nisa.tensor_copy")._replace(engine_given=True)
    relu = _ev(
        2,
        "tensor_scalar",
        "DVE",
        "nisa.tensor_scalar",
        payload=Elementwise("maximum", 512, 1, False, False, False, False, False),
    )
    assert candidates(auto) == ("DVE", "ACT")
    assert candidates(given) == ("DVE",)  # engine= names it (Event.engine_given, recorded by the interpreter)
    assert candidates(relu) == ("DVE",)  # maximum does not run on ScalarE (tbl-aluop)
    act = _ev(3, "activation", "ACT", "nisa.activation")
    assert candidates(act) == ("ACT",)


def _scalar_op(func):
    payload = Elementwise(func, 512, 1, False, False, False, False, False)
    return _ev(0, "tensor_scalar", "DVE", "nl.multiply", payload=payload)


def test_placement_reads_the_interpreters_legality_table():
    # One table for engine rules: a tensor_scalar may move to ScalarE exactly when the interpreter
    # (sim/core/engines.py) would accept it there -- every ALU op legal on Scalar (tbl-aluop) and the
    # (op0, op1) pair one of the trn2 ScalarE combinations.  subtract used to be movable here although
    # the interpreter rejects it on ScalarE.
    from nki_kernels.sim.core import engines

    assert candidates(_scalar_op("subtract")) == ("DVE",)
    assert candidates(_scalar_op("multiply,add")) == ("DVE", "ACT")
    assert candidates(_scalar_op("add,multiply")) == ("DVE",)  # both legal on Scalar, the pair is not
    for name in engines.ALU_OPS:
        on_act = "ACT" in candidates(_scalar_op(name))
        assert on_act == (engines.legal(name, "ACT") and (name, None) in engines.SCALAR_TENSOR_SCALAR), name


# ---- multi-buffering depth --------------------------------------------------------------------


def _loop_loads(n, tile_bytes, buffer=Buffer.SBUF):
    """n iterations of an affine loop, each loading a fresh tile (one allocation site) of
    ``tile_bytes`` per partition."""
    evs = []
    for it in range(n):
        lp = (LoopFrame(LoopKind.AFFINE, 1, it, n, "/x/k.py", 5),)
        e = _load(it, 1, 100 + it, lo=it * 128 * tile_bytes, hi=(it + 1) * 128 * tile_bytes, loops=lp)._replace(line=6)
        if buffer is Buffer.PSUM:
            e = e._replace(writes=(Region(100 + it, Buffer.PSUM, 0, tile_bytes),))
        evs.append(e)
    return evs


def test_the_allocator_multi_buffers_small_sbuf_tiles_deeply_in_every_build():
    # 1 KiB tiles, budget 64 KiB -> min(8, 64) = 8 copies: the 9th load waits for the 1st tile
    evs = _loop_loads(10, 1024)
    deep = build_dependencies(evs, ModelOptions())
    assert all(deep[i] == [] for i in range(8)) and deep[8] == [0] and deep[9] == [1]
    # the same in a skip_middle_end build (the allocator runs in the back end)
    assert build_dependencies(evs, ModelOptions(middle_end=False)) == deep
    # 48 KiB tiles: 64 KiB / 48 KiB = 1, but double buffering fits -> 2 copies
    big = build_dependencies(_loop_loads(5, 48 * 1024), ModelOptions())
    assert big[1] == [] and big[2] == [0]
    # PSUM tiles rotate through psum_buffers banks
    ps = build_dependencies(_loop_loads(5, 1024, Buffer.PSUM), ModelOptions(psum_buffers=2))
    assert ps[2] == [0]


def test_the_allocator_is_bounded_by_the_sbuf_the_kernel_leaves_free():
    evs = _loop_loads(10, 1024)
    usable = int(TRN2.v("sbuf_usable_bytes_per_partition"))
    # 3 KiB free at the peak: the tile itself + 3 more copies = 4
    four = build_dependencies(evs, ModelOptions(), peak_sbuf=usable - 3 * 1024)
    assert all(four[i] == [] for i in range(4)) and four[4] == [0]
    # nothing free: one physical copy, each load waits for the previous one
    one = build_dependencies(evs, ModelOptions(), peak_sbuf=usable)
    assert one[1] == [0] and one[2] == [1]


def test_directly_allocated_tiles_keep_their_place():
    # a kernel that places its row buffer itself (ncc.sbuf.alloc, recorded in Trace.placed_allocs): the allocator
    # does not re-place it, so a whole rewrite is not a new version in another buffer
    evs = []
    for it in range(3):  # tile 7 rewritten whole and read in each iteration of a sequential loop
        lp = (LoopFrame(LoopKind.SEQUENTIAL, 1, it, 3, "/x/k.py", 5),)
        evs.append(_load(2 * it, 1, 7, lo=it * 128 * 2048, hi=(it + 1) * 128 * 2048, loops=lp))
        evs.append(
            _ev(
                2 * it + 1,
                "tensor_copy",
                "DVE",
                "nisa.tensor_copy",
                reads=[Region(7, Buffer.SBUF, 0, 2048)],
                writes=[Region(20 + it, Buffer.SBUF, 0, 2048)],
                loops=lp,
            )
        )
    placed = build_dependencies(evs, ModelOptions(), placed={7})
    assert placed[2] == [0, 1]  # iteration 1's load waits for iteration 0's copy: one buffer
    auto = build_dependencies(evs, ModelOptions())
    assert auto[2] == []  # automatic allocation: a new version elsewhere


def test_an_nki07_program_id_alone_is_not_a_loop():
    # NKI 0.7 traces carry program_id (0,) on every instruction: two writes of tiles allocated at one
    # site outside any loop are distinct buffers, not a rotating ring
    a = _load(0, 1, 10)._replace(program_id=(0,))
    b = _load(1, 2, 11)._replace(program_id=(0,))
    assert build_dependencies([a, b], ModelOptions(serialise=True, middle_end=False)) == [[], []]


# ---- outside the validated domain -------------------------------------------------------------


def test_loops_of_tiny_instructions_are_reported_as_vectorisable():
    def loop(n, N):
        return [
            _ev(
                i,
                "tensor_scalar",
                "DVE",
                "nisa.tensor_scalar",
                N=N,
                loops=(LoopFrame(LoopKind.AFFINE, 1, i, n, "/x/k.py", 7),),
            )
            for i in range(n)
        ]

    assert vectorisable_loops(loop(64, 4)) == [("/x/k.py:7", 64, 1)]
    assert vectorisable_loops(loop(64, 512)) == []  # big instructions: nothing to merge
    assert vectorisable_loops(loop(8, 4)) == []  # few iterations: little to gain


def test_sbuf_over_subscription_warns():
    usable = TRN2.v("sbuf_usable_bytes_per_partition")
    assert sbuf_spill(int(usable) - 1, TRN2) == ""
    assert "spill" in sbuf_spill(int(usable) + 1024, TRN2)
