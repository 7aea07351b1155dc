"""The compiler's choices the cost model makes (docs/cost-model.md, model items 2, 7, 8 and 10), each on
a small synthetic trace whose timeline is worked out by hand in the comments: allocation (a tile
rewritten whole is a new version, in a sequential loop and a skip_middle_end build too), DMA issue,
PSUM fills folded into the first matmul, and the alternatives of undecidable choices that widen the
band."""

from __future__ import annotations

import pytest

from nki_kernels.perf import TRN2, ModelOptions, accuracy
from nki_kernels.perf.compiler import vectorised
from nki_kernels.perf.model import estimate_trace
from nki_kernels.perf.schedule import Scheduler, build_dependencies, schedule
from nki_kernels.sim.trace import Buffer, Dma, Elementwise, Event, LoopFrame, LoopKind, Matmul, Region, Trace

pytestmark = pytest.mark.perf

# Round numbers: TensorE 2 GHz with no per-instruction overhead, no throttle, no result latency and a free
# stationary load; semaphore hop 100 ns; DMAs: 1000 ns latency, 23 B/ns per engine, no per-descriptor or
# fixed engine cost; static trigger 50 ns (profile mode).
HW = TRN2.with_values(
    pe_clock_ghz=2.0,
    pe_instr_overhead_cycles=0,
    pe_throttle_speed=1.0,
    pe_result_latency_cycles=0,
    pe_ls_divisor=1e9,
    sem_ns=100,
    dma_latency_ns=1000,
    dma_desc_ns=0,
    dma_fixed_static_ns=0,
    dma_fixed_hwdge_ns=0,
    static_issue_ns=50,
    dve_clock_ghz=1.0,
    engine_instr_overhead_cycles=0,
    dep_bubble_cycles=0,
)
ROW = 460  # bytes per partition of the input row: 8 partitions x 460 B / 23 B/ns = 160 ns per DMA engine


def _event(seq, op, engine, reads, writes, payload, loops, P=128, N=512, nbytes=0, line=None, dt="bfloat16"):
    return Event(
        seq=seq,
        op=op,
        api=f"nisa.{op}",
        engine=engine,
        partitions=P,
        free_elems=N,
        in_shapes=((P, N),),
        out_shape=(P, N),
        in_dtypes=(dt,),
        out_dtype=dt,
        bytes=nbytes,
        flops=2 * 128 * 128 * N if op == "nc_matmul" else 0,
        reads=tuple(reads),
        writes=tuple(writes),
        payload=payload,
        file="/x/conv.py",
        line=line if line is not None else 10 + seq,
        program_id=(),
        loops=tuple(loops),
    )


def conv_rows(iters=4, kind="sequential", N=200, zero_fill=False):
    """The §3.1c pattern: ONE row buffer (alloc 10) declared before the loop, rewritten whole by a DMA in
    every iteration of a ``kind`` loop, each refill read by 3 accumulating matmuls (moving free size N)
    into that iteration's PSUM tile (alloc 50 + k), optionally zeroed by an nl.zeros fill first."""
    evs = []
    for k in range(iters):
        lp = (LoopFrame(LoopKind(kind), 1, k, iters, "/x/conv.py", 5),)
        src = Region(1, Buffer.HBM, k * 128 * ROW, (k + 1) * 128 * ROW)
        dma = Dma(Buffer.HBM, Buffer.SBUF, 128, ROW, 0, False, False, False)
        evs.append(
            _event(
                len(evs),
                "dma_copy",
                "DMA",
                [src],
                [Region(10, Buffer.SBUF, 0, ROW)],
                dma,
                lp,
                N=ROW // 4,
                nbytes=128 * ROW,
                line=20,
            )
        )
        acc = Region(50 + k, Buffer.PSUM, 0, 4 * N)
        if zero_fill:
            fill = Elementwise("", N, 1, False, False, True, False, False)
            evs.append(_event(len(evs), "memset", "DVE", [], [acc], fill, lp, N=N, line=19, dt="float32"))
        for _ in range(3):
            mm = Matmul(128, 128, N, "bfloat16", "none", True)
            evs.append(
                _event(
                    len(evs),
                    "nc_matmul",
                    "PE",
                    [Region(5, Buffer.SBUF, 0, 256), Region(10, Buffer.SBUF, 0, ROW)],
                    [acc],
                    mm,
                    lp,
                    N=N,
                    line=21,
                )
            )
    return evs


# ---- allocation ---------------------------------------------------------------------------------------


def test_a_single_row_buffer_in_a_sequential_loop_is_refilled_ahead_of_its_readers():
    # Renamed (the allocator's new versions, 8 copies of a 460 B tile): every DMA is ready at 0.  Static
    # triggers at 0, 50, 100, 150; data lands 1000 ns after each trigger, one DMA at a time on the 16
    # engines (160 ns each): 1050-1210, 1210-1370, 1370-1530, 1530-1690.  Each iteration's 3 matmuls
    # (200 columns at 2 GHz = 100 ns each) start 100 ns after their row landed, or when TensorE is free:
    # 1310-1610, 1610-1910 (ready 1470), 1910-2210 (ready 1630), 2210-2510 (ready 1790).
    evs = conv_rows()
    opts = ModelOptions(mode="profile", middle_end=False)  # a skip_middle_end_transformations build
    s = schedule(evs, HW, opts)
    assert [s.dma[i].data_start for i in (0, 4, 8, 12)] == pytest.approx([1050, 1210, 1370, 1530])
    assert [s.start[i] for i in (1, 5, 9, 13)] == pytest.approx([1310, 1610, 1910, 2210])
    assert s.makespan_ns == pytest.approx(2510)
    # One physical buffer (no new versions: what the model did before): each refill waits for the
    # previous row's 3 matmuls, so an iteration is trigger 50 + latency 1000 + data 160 + hop 100 +
    # 3 x 100 = 1610 ns, one after the other: 4 x 1610 = 6440 ns.
    flat = schedule(evs, HW, ModelOptions(mode="profile", middle_end=False, rename=False))
    assert flat.dma[4].issue_start == pytest.approx(1610)
    assert flat.makespan_ns == pytest.approx(4 * 1610)


def test_the_row_buffer_keeps_one_place_when_the_kernel_allocates_it_itself():
    # the row buffer (allocation 10) placed by the kernel (ncc.sbuf.alloc: Trace.placed_allocs)
    evs = conv_rows()
    opts = ModelOptions(mode="profile", middle_end=False)
    placed = schedule(evs, HW, opts, placed={10})
    assert placed.makespan_ns == pytest.approx(4 * 1610)  # the hand timeline of one buffer above


def test_a_skip_middle_end_build_issues_sequential_loop_dmas_from_every_queue():
    # Benchmark mode, 3 DGE queues of 300 ns (all of the DGE time is occupancy), short matmuls (64 columns:
    # 32 ns each, 96 ns a row).  Sequential loop: triggers 0, 0, 0, 300 -> rows land 1300-1460, 1460-1620,
    # 1620-1780, 1780-1940 (one DMA at a time on the engines); the last row's matmuls 2040-2136.
    # Affine loop (the CS149 part 1 kernels' pattern, one queue): triggers 0, 300, 600, 900 -> the last
    # row lands 2200-2360, its matmuls 2460-2556.
    hw = HW.with_values(dge_issue_ns=300, dge_exec_ns=300, dge_queues=3)
    opts = ModelOptions(mode="benchmark", middle_end=False)
    seq = schedule(conv_rows(kind="sequential", N=64), hw, opts)
    aff = schedule(conv_rows(kind="affine", N=64), hw, opts)
    assert sorted(seq.dma[i].issue_start for i in (0, 4, 8, 12)) == pytest.approx([0, 0, 0, 300])
    assert seq.makespan_ns == pytest.approx(2136)
    assert [aff.dma[i].issue_start for i in (0, 4, 8, 12)] == pytest.approx([0, 300, 600, 900])
    assert aff.makespan_ns == pytest.approx(2556)


# ---- PSUM fills ---------------------------------------------------------------------------------------


def test_a_psum_fill_before_an_accumulation_is_folded_into_the_first_matmul():
    # One row, with an nl.zeros PSUM fill (VectorE, 200 fp32 elements: max(64, 200) cycles at 1 GHz =
    # 200 ns) before its matmuls.  Folded (the documented overwrite flag): no VectorE slice; the matmuls
    # start when the row landed (1050-1210) + 100 = 1310 -> end 1610.  Executed: the fill (0-200) is done
    # long before the row lands, so the timeline is the same.
    evs = conv_rows(iters=1, zero_fill=True)
    folded = schedule(evs, HW, ModelOptions(mode="profile"))
    kept = schedule(evs, HW, ModelOptions(mode="profile", fold_psum_zeros=False))
    assert 1 in folded.elided and folded.start[1] == folded.end[1]  # no VectorE slice
    assert folded.busy_ns["DVE"] == 0 and kept.busy_ns["DVE"] == pytest.approx(200)
    assert folded.makespan_ns == pytest.approx(1610) and kept.makespan_ns == pytest.approx(1610)
    # without the row DMA the fill is on the critical path: executed, 0-200 fill, +100 hop, 3 x 100
    # matmuls = 600 ns; folded, the matmuls start at 0 (a folded fill signals nothing) = 300 ns
    no_dma = [e._replace(reads=e.reads[:1]) for e in evs[1:]]
    no_dma = [e._replace(seq=i) for i, e in enumerate(no_dma)]
    assert schedule(no_dma, HW, ModelOptions(mode="profile")).makespan_ns == pytest.approx(300)
    assert schedule(no_dma, HW, ModelOptions(mode="profile", fold_psum_zeros=False)).makespan_ns == pytest.approx(600)


# ---- alternatives of undecidable choices ------------------------------------------------------------


def tiny_loop(n=32):
    """n independent VectorE ops of 4 elements per partition in an affine loop (each its own result tile,
    one source line): a loop the compiler may vectorise."""
    evs = []
    for k in range(n):
        lp = (LoopFrame(LoopKind.AFFINE, 1, k, n, "/x/tiny.py", 5),)
        p = Elementwise("multiply", 4, 1, False, False, False, False, False)
        evs.append(
            _event(
                k,
                "tensor_scalar",
                "DVE",
                [Region(100 + k, Buffer.SBUF, 0, 16)],
                [Region(200 + k, Buffer.SBUF, 0, 16)],
                p,
                lp,
                N=4,
                line=6,
                dt="float32",
            )
        )
    return evs


def test_a_vectorised_tiny_loop_runs_as_one_instruction():
    # as traced: 32 x max(64, 4) cycles at 1 GHz = 32 x 64 ns back to back on VectorE = 2048 ns;
    # merged: one instruction of 32 x 4 = 128 elements, max(64, 128) = 128 ns
    evs = tiny_loop()
    opts = ModelOptions(mode="profile", place_engines=False)
    deps = build_dependencies(evs, opts)
    assert schedule(evs, HW, opts).makespan_ns == pytest.approx(2048)
    ev2, deps2, elided = vectorised(evs, deps)
    assert set(elided) == set(range(1, 32)) and ev2[0].free_elems == 128
    assert Scheduler(ev2, HW, opts, deps2, elided).run().makespan_ns == pytest.approx(128)


def test_the_band_covers_every_alternative_and_names_the_choice_that_widened_it():
    # The tiny loop: pipelined as traced 2048 ns, merged 128 ns, not pipelined (one copy, program order)
    # 2048 ns (independent ops: nothing to pipeline).  The band spans the merged alternative too, and
    # the text says which choice widened it.
    trace = Trace(events=tiny_loop())
    est = estimate_trace(trace, hw=HW, options=ModelOptions(mode="profile", place_engines=False, include_floor=False))
    assert est.latency_us == pytest.approx(2.048)
    alts = {a.other: a.latency_us for a in est.alternatives}
    assert alts["merged across iterations by the compiler"] == pytest.approx(0.128)
    t = accuracy.typical_error(est)
    lo, hi = accuracy.band_us(est)
    assert lo == pytest.approx(0.128 * (1 - t)) and hi == pytest.approx(2.048 * (1 + t))
    assert "band widened by: loops of tiny instructions (merged across iterations" in accuracy.band_text(est)
    # a kernel that meets no undecidable choice keeps the plain band
    plain = estimate_trace(Trace(events=conv_rows(iters=2)), hw=HW, options=ModelOptions(mode="profile"))
    assert accuracy.widening(plain) == []
    assert accuracy.band_us(plain) == pytest.approx(
        (plain.latency_us * (1 - accuracy.typical_error(plain)), plain.latency_us * (1 + accuracy.typical_error(plain)))
    )
