"""Cost model unit tests on hand-built traces (no interpreter needed).

Expected values are derived here from the hardware constants, never hard-coded latencies.
"""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from nki_kernels.perf import TRN1, TRN2, ModelOptions, estimate_trace, get_hardware
from nki_kernels.perf.chrome_trace import to_chrome_trace
from nki_kernels.perf.costs import compute_cost_ns, dma_cost
from nki_kernels.perf.hardware import TAGS, spec_from_dict
from nki_kernels.perf.report import profile_fields
from nki_kernels.perf.schedule import build_dependencies, schedule
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
    Trace,
    Transpose,
)

pytestmark = pytest.mark.perf


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
    flops=0,
    line=None,
):
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
        flops=flops,
        reads=tuple(reads),
        writes=tuple(writes),
        payload=payload_of(op, engine, P, N, dt, payload),
        file="/x/kernel.py",
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


def hbm(aid, n):
    return Region(aid, "hbm", 0, n)


def sb(aid, n, lo=0):
    return Region(aid, "sbuf", lo, lo + n)


def load(seq, src, dst, P=128, F=512, loops=()):
    nb = P * F * 4
    return ev(
        seq, "dma_copy", "DMA", P, F, [hbm(src, nb)], [sb(dst, nb)], nb, dma("hbm", "sbuf", P, F * 4), loops=loops
    )


def store(seq, src, dst, P=128, F=512, loops=()):
    nb = P * F * 4
    return ev(
        seq, "dma_copy", "DMA", P, F, [sb(src, nb)], [hbm(dst, nb)], nb, dma("sbuf", "hbm", P, F * 4), loops=loops
    )


def vadd(seq, a, b, o, F=512, loops=(), dt="float32"):
    nb = 128 * F * 4
    return ev(
        seq,
        "tensor_tensor",
        "DVE",
        128,
        F,
        [sb(a, nb), sb(b, nb)],
        [sb(o, nb)],
        payload=Elementwise("add", F, 1, False, False, False, False, False),
        loops=loops,
        dt=dt,
    )


# ---- hardware description -----------------------------------------------------------------


def test_every_constant_has_tag_source_and_fitted_values_sit_in_their_range():
    for name, c in TRN2.constants.items():
        assert c.tag in TAGS, name
        assert c.source.strip(), name
        if c.tag == "F":
            assert c.range is not None and c.range[0] <= c.value <= c.range[1], name
            assert c.prior is not None, name


def test_trn1_is_data_only_and_differs_where_documented():
    assert TRN1.v("pe_clock_ghz") == 2.8 and TRN2.v("pe_clock_ghz") == 2.4
    assert TRN1.pe_peak_flops("bfloat16") > TRN2.pe_peak_flops("bfloat16")
    assert set(TRN1.constants) == set(TRN2.constants)


def test_json_description_inherits_from_base(tmp_path):
    p = tmp_path / "mycore.json"
    p.write_text(
        json.dumps(
            {
                "name": "mycore",
                "base": "trn2",
                "constants": {"pe_clock_ghz": {"value": 1.2, "tag": "E", "source": "test"}},
            }
        )
    )
    hw = get_hardware(str(p))
    assert hw.v("pe_clock_ghz") == 1.2
    assert hw.pe_peak_flops("bfloat16") == pytest.approx(TRN2.pe_peak_flops("bfloat16") / 2)
    with pytest.raises(ValueError, match="lacks constants"):
        spec_from_dict({"name": "bad", "constants": {"pe_clock_ghz": 1.0}})


def test_peaks_match_section_1_2():
    assert TRN2.pe_peak_flops("bfloat16") / 1e12 == pytest.approx(78.64, rel=1e-3)
    assert TRN2.pe_peak_flops("float32") / 1e12 == pytest.approx(19.66, rel=1e-3)


# ---- cost table -----------------------------------------------------------------------------


def test_matmul_cost_is_moving_free_size_over_pe_clock_and_fp32_is_4x():
    mm = ev(0, "nc_matmul", "PE", 128, 512, payload=mm_payload(512, "bfloat16"), dt="bfloat16")
    ns, known = compute_cost_ns(mm, TRN2)
    assert known and ns == pytest.approx(512 / TRN2.v("pe_clock_ghz"))
    mm32 = ev(0, "nc_matmul", "PE", 128, 512, payload=mm_payload(512, "float32"), dt="float32")
    assert compute_cost_ns(mm32, TRN2)[0] == pytest.approx(4 * ns)
    tiny = ev(0, "nc_matmul", "PE", 128, 8, payload=mm_payload(8, "bfloat16"), dt="bfloat16")
    assert compute_cost_ns(tiny, TRN2)[0] == pytest.approx(TRN2.v("pe_min_cycles") / TRN2.v("pe_clock_ghz"))


def test_vector_perf_mode_makes_bf16_copies_cheaper_than_fp32():
    # the element rate is 4x; the per-instruction overhead (engine_instr_overhead_cycles) is not
    c16 = ev(0, "tensor_copy", "DVE", 128, 2048, dt="bfloat16")
    c32 = ev(0, "tensor_copy", "DVE", 128, 2048, dt="float32")
    over = TRN2.v("engine_instr_overhead_cycles") / TRN2.v("dve_clock_ghz")
    assert compute_cost_ns(c16, TRN2)[0] - over == pytest.approx(
        (compute_cost_ns(c32, TRN2)[0] - over) / TRN2.v("dve_perf_mode_fast")
    )


def test_engine_overheads_match_the_profiled_issue_intervals():
    # trainium-kernel-fusion neuron-profile: a 512-element fp32 VectorE reduce/copy issues every
    # ~595 ns (N + ~60 cycles at 0.96 GHz), a ScalarE copy every ~476 ns and a ScalarE exp every
    # ~600 ns (1.2 GHz); the model within 3 %
    red = ev(0, "tensor_reduce", "DVE", 128, 512, payload=Reduce("max", 512, 1))
    cp = ev(0, "tensor_copy", "ACT", 128, 512)
    ex = ev(0, "activation", "ACT", 128, 512, payload=Elementwise("exp", 512, 1, False, False, False, False, False))
    assert compute_cost_ns(red, TRN2)[0] == pytest.approx(595, rel=0.03)
    assert compute_cost_ns(cp, TRN2)[0] == pytest.approx(476, rel=0.03)
    assert compute_cost_ns(ex, TRN2)[0] == pytest.approx(600, rel=0.03)


def test_unknown_op_is_costed_and_flagged():
    _, known = compute_cost_ns(ev(0, "mystery_op", "DVE"), TRN2)
    assert known is False


def test_dma_engine_cost_is_max_of_control_path_and_data_path():
    # P=4, 4 rows of 8 KiB on one engine: data 4*8192/23 = 1424.8 ns > control fixed + 4*15
    c = dma_cost(load(0, 1, 2, P=4, F=2048), TRN2, "static")
    assert c.rings == 1
    assert c.ring_ns == pytest.approx(4 * 8192 / TRN2.v("dma_ring_bytes_per_ns"))
    big = dma_cost(load(0, 1, 2, P=128, F=2048), TRN2, "static")
    assert big.rings == 16
    # 128 rows of 4 B: 8 per engine, control-bound: fixed + 8 * 15 ns
    tiny = dma_cost(load(0, 1, 2, P=128, F=1), TRN2, "static")
    assert tiny.ring_ns == pytest.approx(TRN2.v("dma_fixed_static_ns") + 8 * TRN2.v("dma_desc_ns"))
    tiny_hw = dma_cost(load(0, 1, 2, P=128, F=1), TRN2, "hwdge")
    assert tiny_hw.ring_ns == pytest.approx(TRN2.v("dma_fixed_hwdge_ns") + 8 * TRN2.v("dma_desc_ns"))
    assert tiny_hw.issue_ns == TRN2.v("dge_issue_ns") and tiny.issue_ns == TRN2.v("static_issue_ns")


# ---- scheduler ----------------------------------------------------------------------------------


def test_raw_dependency_and_semaphore():
    evs = [load(0, 1, 10), vadd(1, 10, 10, 11), store(2, 11, 3)]
    s = schedule(evs, TRN2, ModelOptions(mode="profile"))
    assert s.deps[1] == [0] and s.deps[2] == [1]
    assert s.start[1] == pytest.approx(s.end[0] + TRN2.v("sem_ns"))
    assert s.dma[2].issue_start >= s.end[1]


def test_war_on_chip_waits_for_reader_but_hbm_has_only_raw():
    evs = [load(0, 1, 10), vadd(1, 10, 10, 11), load(2, 2, 10)]  # overwrite tile 10 after it is read
    deps = build_dependencies(evs, ModelOptions())
    assert 1 in deps[2] and 0 in deps[2]
    evs2 = [load(0, 1, 10), store(1, 10, 5), store(2, 10, 5)]  # two stores to one HBM range
    assert build_dependencies(evs2, ModelOptions())[2] == [0]


def test_independent_dmas_overlap_their_latency():
    evs = [load(i, 100 + i, 200 + i) for i in range(4)]
    s = schedule(evs, TRN2, ModelOptions(mode="profile"))
    one = schedule(evs[:1], TRN2, ModelOptions(mode="profile")).makespan_ns
    assert s.makespan_ns < 4 * one * 0.75


def test_strict_program_order_with_window_one():
    evs = [vadd(0, 1, 1, 2), vadd(1, 3, 3, 4)]  # independent, same engine
    s = schedule(evs, TRN2, ModelOptions(window=1))
    assert s.start[1] >= s.end[0] - 1e-9


def _loop_trace(kind, iters=6):
    evs, seq = [], 0
    for it in range(iters):
        lp = (frame(kind, it),)
        a, o = 1000 + 2 * it, 1001 + 2 * it  # fresh tiles each iteration, same source lines
        evs.append(load(seq, 1, a, loops=lp)._replace(line=20))
        evs.append(vadd(seq + 1, a, a, o, loops=lp)._replace(line=21))
        evs.append(store(seq + 2, o, 3, loops=lp)._replace(line=22))
        seq += 3
    return evs


def test_sequential_range_tiles_get_new_versions_like_affine_ones():
    # the allocator's depth does not depend on the loop kind (§3.1c: a sequential_range conv at 90 % MFU);
    # without pipelining (serialise) iteration 1's load waits for iteration 0's read of the slot
    seq = schedule(_loop_trace("sequential"), TRN2, ModelOptions(mode="profile"))
    aff = schedule(_loop_trace("affine"), TRN2, ModelOptions(mode="profile"))
    assert seq.makespan_ns == pytest.approx(aff.makespan_ns)
    assert build_dependencies(_loop_trace("sequential"), ModelOptions())[3] == []
    flat = schedule(_loop_trace("sequential"), TRN2, ModelOptions(mode="profile", serialise=True))
    assert flat.makespan_ns > 1.5 * seq.makespan_ns
    assert 1 in build_dependencies(_loop_trace("sequential"), ModelOptions(serialise=True))[3]


def test_pe_burst_after_idle_is_throttled_for_one_window_then_runs_at_full_speed():
    mms = [
        ev(
            i,
            "nc_matmul",
            "PE",
            128,
            512,
            reads=[sb(1, 128)],
            writes=[Region(2, "psum", 0, 2048)],
            payload=mm_payload(accumulate=True),
            dt="bfloat16",
            flops=2 * 128 * 128 * 512,
        )
        for i in range(200)
    ]
    s = schedule(mms, TRN2)
    clk = TRN2.v("pe_clock_ghz")
    nominal = (512 + TRN2.v("pe_instr_overhead_cycles")) / clk
    ls = 128 / TRN2.v("pe_ls_divisor") / clk  # the first matmul loads the stationary
    durs = [s.end[i] - s.start[i] for i in range(200)]
    assert durs[0] == pytest.approx((nominal + ls) / TRN2.v("pe_throttle_speed"))
    assert s.exposed_ls_ns == pytest.approx(ls)
    assert durs[-1] == pytest.approx(nominal)
    extra = sum(durs) - 200 * nominal - ls
    # one window at 50 % costs W * (1 - 0.5) of extra time, plus at most the stretch of the
    # instruction that straddles the window edge (it runs at the limit it started with)
    W, f = TRN2.v("pe_throttle_window_ns"), TRN2.v("pe_throttle_speed")
    assert W * (1 - f) - nominal <= extra <= W * (1 - f) + nominal


# ---- result, exports ---------------------------------------------------------------------------


def _small_trace():
    evs = []
    for it in range(3):
        lp = (frame("affine", it),)
        evs += [
            load(4 * it, 1, 100 + 3 * it, loops=lp),
            load(4 * it + 1, 2, 101 + 3 * it, loops=lp),
            vadd(4 * it + 2, 100 + 3 * it, 101 + 3 * it, 102 + 3 * it, loops=lp),
            store(4 * it + 3, 102 + 3 * it, 3, loops=lp),
        ]
    evs.append(
        ev(
            12,
            "nc_matmul",
            "PE",
            128,
            512,
            reads=[sb(100, 128)],
            writes=[Region(50, "psum", 0, 2048)],
            payload=mm_payload(),
            dt="bfloat16",
            flops=2 * 128 * 128 * 512,
        )
    )
    evs.append(
        ev(
            13,
            "activation",
            "ACT",
            128,
            512,
            reads=[Region(50, "psum", 0, 2048)],
            writes=[sb(60, 2048)],
            payload=Elementwise("exp", 512, 1, False, True, False, False, False),
        )
    )
    return Trace(events=evs, kernel_name="small")


def test_estimate_fields_are_consistent():
    e = estimate_trace(_small_trace())
    assert e.latency_us == pytest.approx(e.floor_us + e.makespan_us)
    assert e.floor_us == TRN2.v("floor_benchmark_us")
    assert e.dma_count == 9 and e.hbm_bytes == 9 * 128 * 512 * 4
    assert e.matmul_flops == 2 * 128 * 128 * 512
    assert e.mfu == pytest.approx(e.matmul_flops / (e.latency_us * 1e-6 * TRN2.pe_peak_flops("bfloat16")))
    assert e.critical_engine in e.engine_busy_us
    assert e.top_lines and e.top_lines[0][1] >= e.top_lines[-1][1]
    txt = e.summary()
    assert "ESTIMATE" in txt and "estimate (cost model)" in txt
    f = profile_fields(e)
    for k in ("total_time", "dma_transfer_count", "hbm_read_bytes", "tensor_engine_active_time"):
        assert k in f
    assert f["total_time"] == pytest.approx(e.latency_us * 1e-6)


def test_chrome_trace_is_well_formed_one_track_per_engine_and_sums_match():
    e = estimate_trace(_small_trace())
    doc = json.loads(json.dumps(to_chrome_trace(e)))
    evs = doc["traceEvents"]
    names = {x["tid"]: x["args"]["name"] for x in evs if x["ph"] == "M" and x["name"] == "thread_name"}
    slices = [x for x in evs if x["ph"] == "X"]
    assert slices and all(set(x) >= {"name", "ph", "ts", "dur", "pid", "tid"} for x in slices)
    assert all(x["ts"] >= 0 and x["dur"] >= 0 and x["tid"] in names for x in slices)
    assert len(set(names.values())) == len(names)
    for eng in ("PE", "ACT", "DVE"):
        tids = [t for t, n in names.items() if n.endswith(f"({eng})")]
        assert len(tids) == 1, eng
        mine = sorted((x for x in slices if x["tid"] == tids[0]), key=lambda x: x["ts"])
        for a, b in pairwise(mine):
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-6  # in-order, no overlap on a track
        assert sum(x["dur"] for x in mine) == pytest.approx(e.engine_busy_us[eng])
        assert all("kernel.py:" in x["args"]["line"] for x in mine)
    end = max(x["ts"] + x["dur"] for x in slices)
    assert end == pytest.approx(e.latency_us)
    assert doc["otherData"]["estimate"] is True
    for t, n in names.items():
        if n.startswith("DMA queue") or n.startswith("DMA issue"):
            q = sorted((x for x in slices if x["tid"] == t), key=lambda x: x["ts"])
            for a, b in pairwise(q):
                assert b["ts"] >= a["ts"] + a["dur"] - 1e-6


def test_json_record_and_roofline(tmp_path):
    e = estimate_trace(_small_trace())
    p = e.write_json(str(tmp_path / "r.json"))
    rec = json.load(open(p))
    assert rec["label"] == "estimate (cost model)" and rec["latency_us"] == pytest.approx(e.latency_us)
    pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
    from nki_kernels.perf.roofline import plot_roofline, point_of

    out = plot_roofline([point_of("small", e)], str(tmp_path / "roof.png"))
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_registers_three_subcommands():
    import argparse

    from nki_kernels.perf.cli import add_subcommands

    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd")
    add_subcommands(sub)
    for cmd in (["profile", "matmul", "--shape", "128,128,512"], ["bench"], ["roofline"]):
        a = ap.parse_args(cmd)
        assert callable(a.func)


def test_bench_reports_missing_kernel_cleanly(monkeypatch):
    from nki_kernels.perf import bench

    real = bench.cases

    def fake():
        cs = real()[:1]
        cs[0].kernel = "nki_kernels.kernels.does_not_exist:nothing"
        return cs

    monkeypatch.setattr(bench, "cases", fake)
    rows = bench.run_bench(progress=None)
    assert rows[0].status == "unavailable"
    txt = bench.render(rows)
    assert "kernel not available yet" in txt and "ESTIMATE" in txt


def test_every_output_carries_the_uncertainty_band():
    from nki_kernels.perf import accuracy

    e = estimate_trace(_small_trace())
    band = accuracy.band_text(e)
    cls = accuracy.CLASS_BANDS[e.op_class]
    assert f"\u00b1{100 * cls.typical:.0f} % ({e.op_class} class)" in band and band == e.band_text
    assert band in e.summary()
    rec = e.to_record()
    assert rec["accuracy"]["typical_error"] == cls.typical and rec["accuracy"]["op_class"] == e.op_class
    lo, hi = rec["accuracy"]["band_us"]
    assert lo < e.latency_us < hi
    doc = to_chrome_trace(e)
    assert doc["otherData"]["band_text"] == band
    assert band in next(x for x in doc["traceEvents"] if x["name"] == "process_name")["args"]["name"]


def test_outside_the_validated_domain_the_band_widens_and_says_why():
    from nki_kernels.perf import accuracy

    e = estimate_trace(_small_trace())
    inside = e.typical_error
    e.domain = ["affine_range loop at k.py:7 runs 512 iterations of tiny instructions"]
    assert e.typical_error == pytest.approx(max(accuracy.OUTSIDE_FACTOR * inside, accuracy.OUTSIDE_MIN))
    assert "OUTSIDE the validated domain" in e.band_text
    assert any("tiny instructions" in w for w in e.warnings) and e.warnings[0] in e.summary()
    assert e.to_record()["accuracy"]["outside_validated_domain"] == e.domain


def test_mfu_above_the_best_public_measurement_prints_a_warning(monkeypatch):
    from nki_kernels.perf import accuracy

    e = estimate_trace(_small_trace())
    assert e.matmul_flops and e.warnings == []  # this tiny trace is far below the ceiling
    monkeypatch.setitem(accuracy.MFU_CEILING, "matmul", e.mfu / 2)
    assert e.warnings and "above the best public" in e.warnings[0]
    assert e.warnings[0] in e.summary()
    assert e.to_record()["accuracy"]["warnings"] == e.warnings
