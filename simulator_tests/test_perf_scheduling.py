"""Scheduling rules of the cost model (the model in the docstring of ``nki_kernels/perf/schedule.py``) on tiny
synthetic traces.

Each test builds a hand-made trace and a hardware description with round numbers, works the
expected timeline out by hand in its comments, and compares.  No interpreter involved.
"""

from __future__ import annotations

import pytest

from nki_kernels.perf import TRN1, TRN2, ModelOptions
from nki_kernels.perf.schedule import _TensorEngineState, build_dependencies, loop_invariant_transposes, schedule
from nki_kernels.sim.trace import (
    Buffer,
    Dma,
    Elementwise,
    Event,
    LoopFrame,
    LoopKind,
    Matmul,
    Reduce,
    Region,
    Transpose,
)

pytestmark = pytest.mark.perf

# Round numbers: VectorE 1 GHz, tensor_tensor 1 cycle/elem -> a 512-element add takes 512 ns;
# semaphore hop 100 ns, no same-engine bubble, TensorE 2 GHz with no result latency.
HW = TRN2.with_values(
    dve_clock_ghz=1.0,
    tt_cycles_per_elem=1.0,
    sem_ns=100,
    dep_bubble_cycles=0,
    pe_clock_ghz=2.0,
    pe_result_latency_cycles=0,
    engine_instr_overhead_cycles=0,
)


def ev(
    seq,
    op,
    engine,
    P=128,
    N=512,
    reads=(),
    writes=(),
    nbytes=0,
    payload=None,
    dt="float32",
    loops=(),
    api=None,
    line=None,
):
    return Event(
        seq=seq,
        op=op,
        api=api or f"nisa.{op}",
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
        payload=payload_of(op, engine, P, N, dt, payload),
        file="/x/k.py",
        line=line if line is not None else 10 + seq,
        program_id=(),
        loops=tuple(loops),
    )


def payload_of(op, engine, P, N, dt, p=None):
    """The default payload of a synthetic event (``p`` overrides it)."""
    if p is not None:
        return p
    if engine == "DMA":
        return Dma(Buffer.HBM, Buffer.SBUF, P, N * 4, 0, False, op == "dma_transpose", False)
    if op == "nc_matmul":
        return Matmul(128, 128, N, dt, "none", False)
    if op == "nc_transpose":
        return Transpose(P, N, dt, engine == "PE", False, engine == "PE")
    if op == "tensor_reduce":
        return Reduce("add", N, 1)
    return Elementwise("", N, 1, False, False, False, False, False)


def frame(kind, it):
    """One enclosing loop (loop id 1, the iteration ``it``)."""
    return LoopFrame(LoopKind(kind), 1, it, 0, "/x/k.py", 1)


def dma(src, dst, descriptors, contiguous_bytes=0, partition_start=0):
    return Dma(Buffer(src), Buffer(dst), descriptors, contiguous_bytes, partition_start, False, False, False)


def mm_payload(N=512, dt="bfloat16", accumulate=False):
    return Matmul(128, 128, N, dt, "none", accumulate)


def sb(aid, n=2048, lo=0):
    return Region(aid, "sbuf", lo, lo + n)


def hbm(aid, n):
    return Region(aid, "hbm", 0, n)


def vadd(seq, a, b, o, loops=(), line=None):
    return ev(
        seq,
        "tensor_tensor",
        "DVE",
        reads=[sb(a), sb(b)],
        writes=[sb(o)],
        payload=Elementwise("add", 512, 1, False, False, False, False, False),
        loops=loops,
        line=line,
    )


def load(seq, src, dst, P=128, F=512, loops=(), line=None):
    nb = P * F * 4
    return ev(
        seq,
        "dma_copy",
        "DMA",
        P,
        F,
        [hbm(src, nb)],
        [sb(dst, F * 4)],
        nb,
        dma("hbm", "sbuf", P),
        loops=loops,
        line=line,
    )


# ---- list scheduling with a window ------------------------------------------------


def test_list_scheduling_starts_a_ready_instruction_ahead_of_a_stalled_one():
    # DVE queue in program order: A (needs the load of tile 10), B (independent).
    evs = [load(0, 1, 10), vadd(1, 10, 10, 11), vadd(2, 20, 20, 21)]
    strict = schedule(evs, HW, ModelOptions(mode="profile", window=1))
    lst = schedule(evs, HW, ModelOptions(mode="profile", window=2))
    t_load = strict.end[0]
    assert lst.end[0] == pytest.approx(t_load)
    # window 1: A at load end + 100 ns hop, for 512 ns; B only after A
    assert strict.start[1] == pytest.approx(t_load + 100)
    assert strict.start[2] == pytest.approx(t_load + 100 + 512)
    # window 2: B runs first at t=0..512 while A waits; A still starts at load end + 100
    assert lst.start[2] == pytest.approx(0.0) and lst.end[2] == pytest.approx(512)
    assert lst.start[1] == pytest.approx(t_load + 100)
    assert lst.makespan_ns == pytest.approx(t_load + 100 + 512)
    assert lst.reordered == 1 and strict.reordered == 0


def test_window_bounds_the_lookahead():
    # DVE queue: A and B both wait for the load; C is independent and third in the queue.
    evs = [load(0, 1, 10), vadd(1, 10, 10, 11), vadd(2, 10, 10, 12), vadd(3, 20, 20, 21)]
    w2 = schedule(evs, HW, ModelOptions(mode="profile", window=2))
    w3 = schedule(evs, HW, ModelOptions(mode="profile", window=3))
    t = w2.end[0] + 100  # A ready
    # window 2 = {A, B}: nothing ready at 0, C is outside the window -> A at t, then the
    # window {B, C}: B (first in program order, ready) at t+512, C at t+1024
    assert w2.start[1] == pytest.approx(t)
    assert w2.start[2] == pytest.approx(t + 512)
    assert w2.start[3] == pytest.approx(t + 1024)
    # window 3 sees C at 0: C 0..512, then A at t, B at t+512
    assert w3.start[3] == pytest.approx(0.0)
    assert w3.start[1] == pytest.approx(t) and w3.start[2] == pytest.approx(t + 512)


# ---- bounded renaming of tiles rewritten whole in a loop ---------------------------


def _rewrite_loop(iters=3):
    # tile 10 is declared outside the loop; each iteration loads it whole, adds, stores.
    evs, seq = [], 0
    for it in range(iters):
        lp = (frame("affine", it),)
        evs.append(load(seq, 1, 10, loops=lp, line=20))
        evs.append(vadd(seq + 1, 10, 10, 30 + it, loops=lp, line=21))
        seq += 2
    return evs


def test_full_overwrite_in_a_loop_gets_rotating_buffers():
    evs = _rewrite_loop()
    # the allocator gives 2 copies (a 4 KiB budget for 2 KiB tiles), whatever the build: skip_middle_end too
    two_hw = TRN2.with_values(multibuffer_budget_bytes=4096)
    none = build_dependencies(evs, ModelOptions(rename=False, middle_end=False), hw=two_hw)
    two = build_dependencies(evs, ModelOptions(middle_end=False), hw=two_hw)
    # without renaming the load of iteration 1 (event 2) waits for iteration 0's add (WAR)
    assert none[2] == [0, 1]
    # with 2 buffers: iteration 1 writes the 2nd buffer (no wait); iteration 2 (event 4)
    # reuses the 1st buffer and waits for iteration 0's load and add only
    assert two[2] == []
    assert two[4] == [0, 1]
    # RAW inside an iteration is kept; the adds' fresh result tiles (one site, 2 slots) make
    # iteration 2's add also wait for iteration 0's add
    assert two[3] == [2] and two[5] == [1, 4]
    one = build_dependencies(evs, ModelOptions(serialise=True), hw=two_hw)
    assert one[2] == [0, 1]  # no pipelining = no renaming


def test_accumulation_is_not_renamed():
    def lp(i):
        return (frame("affine", i),)

    mm = [
        ev(
            i,
            "nc_matmul",
            "PE",
            reads=[sb(1, 256), sb(2)],
            writes=[Region(50, "psum", 0, 2048)],
            payload=mm_payload(accumulate=True),
            dt="bfloat16",
            loops=lp(i),
        )
        for i in range(3)
    ]
    d = build_dependencies(mm, ModelOptions(psum_buffers=4))
    assert d[1] == [0] and d[2] == [1]


# ---- buffer identity: explicit names ---------------------------------------------------------


def test_named_tiles_from_one_source_line_get_their_own_rings():
    # every iteration allocates two tiles at the same site (one helper line); nbuf = 2
    evs, seq, aid = [], 0, 100
    origins = {}
    for it in range(2):
        lp = (frame("affine", it),)
        for _ in range(2):
            origins[aid] = ("/x/helper.py", 5)
            evs.append(load(seq, 1, aid, loops=lp, line=6))
            seq, aid = seq + 1, aid + 1
    opts = ModelOptions(middle_end=False)
    hw = TRN2.with_values(multibuffer_budget_bytes=4096)
    # unnamed: one ring for all four tiles -> the 3rd tile (event 2) waits for the 1st (event 0)
    assert build_dependencies(evs, opts, origins, hw=hw)[2] == [0]
    # named "a" / "b": two rings of 2 -> nobody waits
    names = {100: "a", 101: "b", 102: "a", 103: "b"}
    assert all(d == [] for d in build_dependencies(evs, opts, origins, names, hw=hw))
    # a third iteration of "a" waits for the first "a"
    evs.append(load(seq, 1, 104, loops=(frame("affine", 2),), line=6))
    origins[104] = ("/x/helper.py", 5)
    assert build_dependencies(evs, opts, origins, {**names, 104: "a"}, hw=hw)[4] == [0]


# ---- the DMA front end ----------------------------------------------------------------


def test_dge_queues_issue_in_parallel_and_the_rest_of_the_dge_time_is_latency():
    # 4 independent 128x512 fp32 loads, benchmark mode (DGE): occupancy 300 ns per DMA on
    # the first free of 2 queues -> issue starts 0, 0, 300, 300
    hw = HW.with_values(dge_issue_ns=300, dge_exec_ns=600, dma_latency_ns=700, dge_queues=2)
    evs = [load(i, 1 + i, 10 + i) for i in range(4)]
    s = schedule(evs, hw, ModelOptions(mode="benchmark"))
    starts = sorted(s.dma[i].issue_start for i in range(4))
    assert starts == pytest.approx([0, 0, 300, 300])
    assert {s.dma[0].dge, s.dma[1].dge} == {0, 1}
    # data of the first DMA: issue end 300 + (600 - 300) latency of the DGE + 700 = 1300
    assert s.dma[0].data_start == pytest.approx(1300)
    # each engine: max(control 450 + 8 rows * 15 ns, data 8 * 2048 B / 23 B/ns = 712.3 ns)
    per = max(hw.v("dma_fixed_hwdge_ns") + 8 * hw.v("dma_desc_ns"), 8 * 2048 / 23)
    assert s.dma[0].data_end - s.dma[0].data_start == pytest.approx(per)
    # the 16 engines are shared: DMA 1 (same arrival) queues behind DMA 0 on every engine
    assert s.dma[1].data_start == pytest.approx(1300 + per)


def test_an_nki07_build_and_affine_loop_dmas_of_a_skip_middle_end_build_issue_from_one_queue():
    # the AWS tutorial's NKI 0.7 build generated every descriptor on GpSimd: one queue, so 4 loads
    # issue at 0, 300, 600, 900; an NKI 0.1 build with the middle end, 3 queues: 0, 0, 0, 300
    hw = HW.with_values(dge_issue_ns=300, dge_exec_ns=300, dge_queues=3, dge_queues_serial=1)
    evs = [load(i, 1 + i, 10 + i) for i in range(4)]
    one = schedule(evs, hw, ModelOptions(mode="benchmark", frontend="nki07"))
    three = schedule(evs, hw, ModelOptions(mode="benchmark", frontend="nki01"))
    assert sorted(one.dma[i].issue_start for i in range(4)) == pytest.approx([0, 300, 600, 900])
    assert sorted(three.dma[i].issue_start for i in range(4)) == pytest.approx([0, 0, 0, 300])

    # skip_middle_end_transformations ("by-loop", the fitted choice): the CS149 part 1 kernels' DMAs
    # in affine_range loops ran one after the other; the §3.1c conv's DMAs in sequential_range loops
    # did not (2,660 in 824 us)
    def looped(kind):
        return [e._replace(loops=(frame(kind, i),), line=20) for i, e in enumerate(evs)]

    skip = ModelOptions(mode="benchmark", middle_end=False)
    aff = schedule(looped("affine"), hw, skip)
    seq = schedule(looped("sequential"), hw, skip)
    assert sorted(aff.dma[i].issue_start for i in range(4)) == pytest.approx([0, 300, 600, 900])
    assert sorted(seq.dma[i].issue_start for i in range(4)) == pytest.approx([0, 0, 0, 300])
    serial = schedule(looped("sequential"), hw, ModelOptions(mode="benchmark", middle_end=False, skip_issue="serial"))
    assert sorted(serial.dma[i].issue_start for i in range(4)) == pytest.approx([0, 300, 600, 900])


def test_dma_queue_is_list_scheduled_in_program_order():
    # DMA 1 (store) waits for the add; DMA 2 is an independent load.  Profile mode: one
    # static queue, 50 ns per trigger.  Window 1: the load is issued only after the store
    # (in program order); window 2: the load goes first at t=0.
    evs = [
        load(0, 1, 10),
        vadd(1, 10, 10, 11),
        ev(
            2,
            "dma_copy",
            "DMA",
            reads=[sb(11)],
            writes=[hbm(3, 128 * 2048)],
            nbytes=128 * 2048,
            payload=dma("sbuf", "hbm", 128),
        ),
        load(3, 2, 20),
    ]
    strict = schedule(evs, HW, ModelOptions(mode="profile", window=1))
    lst = schedule(evs, HW, ModelOptions(mode="profile", window=2))
    assert strict.dma[3].issue_start == pytest.approx(strict.dma[2].issue_end)
    assert strict.dma[2].issue_start == pytest.approx(strict.end[1])
    assert lst.dma[3].issue_start == pytest.approx(50.0)  # right after the first load's trigger
    assert lst.dma[2].issue_start == pytest.approx(lst.end[1])


def test_small_dmas_share_the_engine_of_their_partitions():
    # two 4-partition loads: both on engine 0 (partitions 0-3) queue one behind the other;
    # with the second starting at partition 64 (the DMA payload's partition_start) it uses
    # engine 8 and overlaps the first
    a, b = load(0, 1, 10, P=4, F=2048), load(1, 2, 11, P=4, F=2048)
    s = schedule([a, b], HW, ModelOptions(mode="profile"))
    assert s.dma[1].data_start == pytest.approx(s.dma[0].data_end)
    b = b._replace(payload=b.payload._replace(partition_start=64))
    s2 = schedule([a, b], HW, ModelOptions(mode="profile"))
    assert s2.dma[1].data_start < s2.dma[0].data_end


def test_trn1_has_no_dge_so_dmas_use_static_descriptors():
    # trn1: no hardware DGE -> one static-trigger queue (50 ns each) even in benchmark mode
    evs = [load(i, 1 + i, 10 + i, P=4, F=1) for i in range(3)]
    s = schedule(evs, TRN1, ModelOptions(mode="benchmark"))
    assert [s.dma[i].issue_start for i in range(3)] == pytest.approx([0, 50, 100])
    # P=4 rows of 4 B: one engine (partitions 0-7), control-bound: fixed + 4 descriptors
    per = TRN1.v("dma_fixed_static_ns") + 4 * TRN1.v("dma_desc_ns")
    assert s.dma[0].cost.ring_ns == pytest.approx(per)
    # all three land on engine 0 and queue there: data starts 50 ns apart at the earliest,
    # then back to back on the engine
    d = [s.dma[i] for i in range(3)]
    assert d[1].data_start == pytest.approx(max(d[0].data_end, 50 + 50 + TRN1.v("dma_latency_ns")))
    assert d[2].data_start == pytest.approx(max(d[1].data_end, 100 + 50 + TRN1.v("dma_latency_ns")))


# ---- TensorE per-instruction overhead ---------------------------------------------------


def _mm(seq, stat=1, N=512):
    return ev(
        seq,
        "nc_matmul",
        "PE",
        128,
        N,
        reads=[sb(stat, 256), sb(2)],
        writes=[Region(50, "psum", 0, 2048)],
        payload=mm_payload(N, accumulate=True),
        dt="bfloat16",
    )


def test_matmul_pays_the_per_instruction_overhead():
    # no throttle (speed 1): each 512-column matmul = (512 + 32) cycles at 2 GHz = 272 ns; the
    # first also loads its stationary (128 / 4 = 32 cycles = 16 ns, nothing to hide behind)
    hw = HW.with_values(pe_throttle_speed=1.0, pe_instr_overhead_cycles=32)
    s = schedule([_mm(0), _mm(1)], hw)
    assert s.end[0] - s.start[0] == pytest.approx(272 + 16)
    assert s.start[1] == pytest.approx(288) and s.end[1] == pytest.approx(288 + 272)


def test_an_fp32_matmul_pays_the_overhead_twice():
    # fp32: 4 x 512 cycles as two MATMUL instructions, each + 6 cycles: (2048 + 12) / 2 GHz = 1030 ns;
    # the stationary load (fp32: 4 x 32 cycles = 64 ns) is exposed on the first
    hw = HW.with_values(pe_throttle_speed=1.0, pe_instr_overhead_cycles=6)
    m = _mm(0)._replace(in_dtypes=("float32",), payload=mm_payload(512, "float32", accumulate=True))
    s = schedule([m], hw)
    assert s.end[0] - s.start[0] == pytest.approx(1030 + 64)


# ---- the dI/dt throttle: fixed windows, limit set by the previous window ------------------


def test_first_window_is_throttled_and_a_busy_window_releases_the_next():
    st = _TensorEngineState(HW)
    W = HW.v("pe_throttle_window_ns")  # 3413 ns (4096 cycles of 1.2 GHz)
    assert st.speed(0.0) == pytest.approx(0.5)  # TensorE idle before the kernel
    st._add_busy(0.0, 0.5 * W)  # 50 % of window 0 busy (>= 45 %)
    assert st.speed(W + 10) == pytest.approx(1.0)
    st._add_busy(W + 10, W + 20)  # window 1 nearly idle
    assert st.speed(2 * W + 1) == pytest.approx(0.5)
    assert st.speed(0.9 * W) == pytest.approx(0.5)  # the limit of a window does not change inside it


def test_a_starved_tensor_engine_alternates_instead_of_staying_throttled():
    # 44 % busy at full speed would re-engage the limit; at half speed the same work fills 88 % of
    # the window, so the next window is released: a starved TensorE is at most one window in two
    # at 50 %, never held there
    st = _TensorEngineState(HW)
    W = HW.v("pe_throttle_window_ns")
    st._add_busy(0.0, 0.44 * W)
    assert st.speed(W) == pytest.approx(0.5)
    st._add_busy(W, W + 0.88 * W)
    assert st.speed(2 * W) == pytest.approx(1.0)


def test_throttled_durations_follow_the_windows():
    # back-to-back 512-column matmuls from t=0, no overhead: nominal 256 ns (2 GHz), the first
    # + 16 ns LoadStationary.  Window 0 (0..3413 ns) runs at 0.5: 544, 512, 512, ... ns; the
    # matmul that starts after 3413 ns runs at full speed (window 0 was busy throughout).
    hw = HW.with_values(pe_instr_overhead_cycles=0)
    s = schedule([_mm(i) for i in range(9)], hw)
    W = hw.v("pe_throttle_window_ns")
    assert s.end[0] == pytest.approx(544)
    ends = [s.end[i] for i in range(9)]
    k = next(i for i in range(9) if s.start[i] >= W)
    assert all(s.end[i] - s.start[i] == pytest.approx(512) for i in range(1, k))
    assert all(s.end[i] - s.start[i] == pytest.approx(256) for i in range(k, 9))
    assert ends[k - 1] == pytest.approx(544 + 512 * (k - 1)) and s.start[k] >= W > s.start[k - 1]


# ---- loop-invariant nl.matmul transposes ---------------------------------------------


def _matmul_loop(reload_x: bool, iters=3):
    # x (tile 5) is loaded once before the loop (or in every iteration); each iteration runs
    # nl.matmul(x, y): TensorE transpose of x, copy PSUM -> SBUF, then the matmul
    evs = [load(0, 1, 5, line=30)]
    seq = 1
    for it in range(iters):
        lp = (frame("affine", it),)
        if reload_x and it:
            evs.append(load(seq, 1, 5, loops=lp, line=30))
            seq += 1
        evs.append(
            ev(
                seq,
                "nc_transpose",
                "PE",
                reads=[sb(5)],
                writes=[Region(60 + it, "psum", 0, 512)],
                api="nl.matmul",
                loops=lp,
                line=31,
            )
        )
        evs.append(
            ev(
                seq + 1,
                "tensor_copy",
                "DVE",
                reads=[Region(60 + it, "psum", 0, 512)],
                writes=[sb(70 + it, 512)],
                api="nl.matmul",
                loops=lp,
                line=31,
            )
        )
        m = _mm(seq + 2, stat=70 + it)
        evs.append(m._replace(loops=lp, api="nl.matmul", line=31))
        seq += 3
    return evs


def test_repeated_loop_invariant_transposes_are_hoisted():
    evs = _matmul_loop(reload_x=False)
    # events: 0 load, then per iteration (transpose, copy, matmul) at 1-3, 4-6, 7-9
    assert loop_invariant_transposes(evs) == {4: 1, 5: 2, 7: 1, 8: 2}
    hoisted = schedule(evs, HW, ModelOptions(mode="profile", place_engines=False))
    kept = schedule(evs, HW, ModelOptions(mode="profile", hoist_transposes=False, place_engines=False))
    # elided pairs take no time and finish with the pair they repeat
    assert hoisted.end[4] == pytest.approx(hoisted.end[1]) and hoisted.end[8] == pytest.approx(hoisted.end[2])

    def pe(s):
        return s.busy_ns["PE"]

    one_transpose = kept.end[1] - kept.start[1]
    assert pe(hoisted) < pe(kept) - one_transpose  # two of three transposes are gone
    assert hoisted.busy_ns["DVE"] == pytest.approx(kept.busy_ns["DVE"] / 3)
    assert hoisted.elided == {4: 1, 5: 2, 7: 1, 8: 2}


def test_hoisted_repeats_have_no_slice_in_the_timeline():
    from nki_kernels.perf import estimate_trace
    from nki_kernels.perf.chrome_trace import to_chrome_trace
    from nki_kernels.sim.trace import Trace

    e = estimate_trace(Trace(events=_matmul_loop(reload_x=False)), hw=HW)
    seqs = [
        x["args"]["seq"]
        for x in to_chrome_trace(e)["traceEvents"]
        if x["ph"] == "X" and x.get("cat") in ("PE", "DVE", "ACT")
    ]
    assert sorted(seqs) == [1, 2, 3, 6, 9]  # one transpose + copy, three matmuls


def test_a_transpose_of_rewritten_data_is_not_hoisted():
    assert loop_invariant_transposes(_matmul_loop(reload_x=True)) == {}
