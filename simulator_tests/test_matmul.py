"""Blocked matmul kernels (nki_kernels.kernels.matmul) on the NumPy interpreter."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nki_kernels.kernels import matmul as mm
from nki_kernels.kernels import tiling
from nki_kernels.oracles import matmul_mk_ref, matmul_ref
from nki_kernels.sim import SimOptions, simulate_kernel, trace_kernel
from nki_kernels.sim.core.context import RunContext
from sim_testing import assert_close, strict_interpreter  # noqa: F401  (autouse fixture)

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
SBUF_USABLE = tiling.SBUF_BYTES  # trn2 bytes per partition (nl.tile_size.total_available_sbuf_size)


def _operands(rng, M, N, K, dtype, mk=False):
    a = rng.standard_normal((M, K) if mk else (K, M)).astype(np.float32).astype(dtype)
    b = rng.standard_normal((K, N)).astype(np.float32).astype(dtype)
    return a, b


def _shape_id(s):
    return "m{}_n{}_k{}".format(*s)


# (M, N, K): exact tiles, then partial tiles on one axis at a time, then on all axes together
SHAPES = [
    (128, 512, 128),
    (256, 1024, 384),
    (1, 512, 128),
    (127, 512, 128),
    (129, 512, 128),
    (128, 1, 128),
    (128, 513, 128),
    (128, 640, 128),
    (128, 512, 1),
    (128, 512, 127),
    (128, 512, 129),
    (1, 1, 1),
    (127, 513, 129),
    (640, 640, 640),
]


@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_matmul_fp32_shapes(rng, shape):
    M, N, K = shape
    a, b = _operands(rng, M, N, K, np.float32)
    out = simulate_kernel(mm.matmul, a, b)
    assert out.dtype == np.float32
    assert_close(out, matmul_ref(a, b), np.float32)


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(128, 512, 128), (127, 513, 129), (300, 1100, 700)], ids=_shape_id)
def test_matmul_low_precision(rng, shape, dt):
    M, N, K = shape
    a, b = _operands(rng, M, N, K, DTYPES[dt])
    out = simulate_kernel(mm.matmul, a, b)
    assert out.dtype == np.dtype(DTYPES[dt]), "output must be in rhs's dtype"
    assert_close(out, matmul_ref(a, b), DTYPES[dt])


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
@pytest.mark.parametrize("shape", [(128, 512, 128), (1, 1, 1), (129, 513, 257), (260, 600, 520)], ids=_shape_id)
def test_matmul_mk_matches_oracle(rng, shape, dt):
    M, N, K = shape
    a, b = _operands(rng, M, N, K, DTYPES[dt], mk=True)
    out = simulate_kernel(mm.matmul_mk, a, b)
    assert out.dtype == np.dtype(DTYPES[dt])
    assert_close(out, matmul_mk_ref(a, b), DTYPES[dt])


# ---- several SBUF blocks at a simulable size: shrink the planning budget ----------------------


def _small_budget(monkeypatch, budget):
    monkeypatch.setattr(mm, "SBUF_BUDGET", budget)


@pytest.mark.parametrize("kernel", ["matmul", "matmul_mk"])
def test_matmul_multi_block_resident(rng, monkeypatch, kernel):
    M, N, K = 640, 1100, 300
    _small_budget(monkeypatch, 40 * 1024)
    plan = mm.plan_matmul(M, N, K, 4, transpose_lhs=kernel == "matmul_mk")
    assert plan.resident and len(plan.m_blocks) >= 2 and len(plan.n_blocks) >= 2, plan
    a, b = _operands(rng, M, N, K, np.float32, mk=kernel == "matmul_mk")
    out = simulate_kernel(getattr(mm, kernel), a, b)
    ref = matmul_mk_ref(a, b) if kernel == "matmul_mk" else matmul_ref(a, b)
    assert_close(out, ref, np.float32)


@pytest.mark.parametrize("kernel", ["matmul", "matmul_mk"])
def test_matmul_chunked_k(rng, monkeypatch, kernel):
    """K too large to keep resident: K streams through the PSUM accumulators in chunks."""
    M, N, K = 200, 700, 1200
    _small_budget(monkeypatch, 24 * 1024)
    plan = mm.plan_matmul(M, N, K, 4, transpose_lhs=kernel == "matmul_mk")
    assert not plan.resident and plan.chunk_tiles < plan.k_tiles, plan
    assert plan.k_tiles % plan.chunk_tiles != 0 or K % 128, "want a partial last chunk"
    a, b = _operands(rng, M, N, K, np.float32, mk=kernel == "matmul_mk")
    out = simulate_kernel(getattr(mm, kernel), a, b)
    ref = matmul_mk_ref(a, b) if kernel == "matmul_mk" else matmul_ref(a, b)
    assert_close(out, ref, np.float32)


def test_matmul_shuffled_affine_and_poison(rng, monkeypatch):
    """Every affine_range shuffled, uninitialised memory NaN: a loop-carried dependency or a
    read of an unwritten tile region would change or poison the result."""
    M, N, K = 520, 1100, 390
    _small_budget(monkeypatch, 40 * 1024)
    a, b = _operands(rng, M, N, K, np.float32)
    for seed in (3, 11):
        out = simulate_kernel(mm.matmul, a, b, options=SimOptions(strict=True, poison=True, shuffle_affine_seed=seed))
        assert_close(out, matmul_ref(a, b), np.float32, what=f"shuffle seed {seed}")
    a2, b2 = _operands(rng, 130, 600, 300, np.float32, mk=True)
    out = simulate_kernel(mm.matmul_mk, a2, b2, options=SimOptions(strict=True, poison=True, shuffle_affine_seed=5))
    assert_close(out, matmul_mk_ref(a2, b2), np.float32, what="matmul_mk shuffled")


@settings(max_examples=8, deadline=None)
@given(
    M=st.integers(1, 300),
    N=st.integers(1, 700),
    K=st.integers(1, 300),
    dt=st.sampled_from(sorted(DTYPES)),
    mk=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_matmul_property_random_shapes(M, N, K, dt, mk, seed):
    rng = np.random.default_rng(seed)
    a, b = _operands(rng, M, N, K, DTYPES[dt], mk=mk)
    out = simulate_kernel(mm.matmul_mk if mk else mm.matmul, a, b)
    ref = matmul_mk_ref(a, b) if mk else matmul_ref(a, b)
    assert_close(out, ref, DTYPES[dt])


# ---- block reuse, DMA sizes, capacity: read from the instruction trace ------------------------


def _hbm_reads(trace, input_ids):
    """Bytes loaded from each kernel input (by allocation id) over all DMAs."""
    got = {i: 0 for i in input_ids}
    for ev in trace.events:
        if ev.engine == "DMA":
            for r in ev.reads:
                if r.alloc_id in got:
                    got[r.alloc_id] += ev.bytes
    return got


def test_matmul_block_reuse_from_trace(rng, monkeypatch):
    """lhsT is read from HBM exactly once and rhs once per m-block; reloading operand tiles
    per output tile (the naive nest) would read ~(N/512)x lhsT and ~(M/128)x rhs."""
    M, N, K = 768, 2048, 256
    _small_budget(monkeypatch, 32 * 1024)
    plan = mm.plan_matmul(M, N, K, 4)
    assert len(plan.m_blocks) >= 2 and len(plan.n_blocks) >= 2, plan
    a, b = _operands(rng, M, N, K, np.float32)
    out, trace = trace_kernel(mm.matmul, a, b)
    assert_close(out, matmul_ref(a, b), np.float32)
    # kernel arguments become the first two allocations, in argument order
    hbm_ids = sorted({r.alloc_id for ev in trace.events if ev.engine == "DMA" for r in ev.reads if r.buffer == "hbm"})
    assert len(hbm_ids) == 2, hbm_ids
    lhsT_id, rhs_id = hbm_ids
    reads = _hbm_reads(trace, hbm_ids)
    isz = 4
    assert reads[lhsT_id] == M * K * isz, "every lhsT element must be loaded exactly once"
    assert reads[rhs_id] == len(plan.m_blocks) * K * N * isz, "rhs loaded once per m-block"
    n_tiles = -(-M // 128) * -(-N // 512)
    naive = n_tiles * K * (128 + 512) * isz
    assert reads[lhsT_id] + reads[rhs_id] < naive / 2, (reads, naive)


@pytest.mark.slow
@pytest.mark.parametrize("n,dt", [(2048, "bf16"), (4096, "bf16"), (2048, "fp32")])
def test_matmul_big_plan_trace(n, dt):
    """Trace-only run of a large matmul: loads move >= 2 KiB per partition row where the plan
    allows, HBM traffic is what the plan documents, SBUF/PSUM stay within trn2 capacity."""
    a = np.zeros((n, n), DTYPES[dt])
    isz = np.dtype(DTYPES[dt]).itemsize
    plan = mm.plan_matmul(n, n, n, isz)
    _, trace = trace_kernel(mm.matmul, a, a, options=SimOptions(strict=True, trace_only=True, poison=False))
    dmas = [ev for ev in trace.events if ev.engine == "DMA"]
    loads = [ev for ev in dmas if ev.payload.src == "hbm"]
    assert sum(ev.bytes for ev in loads) == plan.hbm_read_bytes
    assert sum(ev.bytes for ev in dmas if ev.payload.dst == "shared_hbm") == n * n * isz
    lhsT_runs = {ev.payload.contiguous_bytes for ev in loads if ev.out_shape[-1] == plan.block_m}
    rhs_runs = {ev.payload.contiguous_bytes for ev in loads if ev.out_shape[-1] == plan.block_n}
    assert min(lhsT_runs) >= min(2048, plan.block_m * isz) and min(rhs_runs) == plan.block_n * isz
    assert min(ev.bytes for ev in loads) >= 128 * 2048, "load DMAs should be large transfers"
    assert trace.peak_sbuf_bytes_per_partition <= SBUF_USABLE
    assert trace.peak_psum_bytes_per_partition <= 16 * 1024
    mms = [ev for ev in trace.events if ev.op == "nc_matmul"]
    assert all(ev.payload.M == 128 and ev.payload.N == 512 for ev in mms), "full TensorE tiles"
    assert sum(ev.flops for ev in mms) == 2 * n**3


@pytest.mark.parametrize(
    "shape",
    [
        (4096, 4096, 4096),
        (2048, 2048, 2048),
        (8192, 8192, 16384),
        (64, 100000, 64),
        (100000, 64, 200),
        (300, 300, 60000),
    ],
    ids=_shape_id,
)
@pytest.mark.parametrize("dt", ["fp32", "bf16"])
@pytest.mark.parametrize("mk", [False, True], ids=["lhsT", "mk"])
def test_plan_fits_sbuf(shape, dt, mk):
    M, N, K = shape
    isz = np.dtype(DTYPES[dt]).itemsize
    plan = mm.plan_matmul(M, N, K, isz, transpose_lhs=mk)
    assert plan.sbuf_bytes <= mm.SBUF_BUDGET <= SBUF_USABLE, plan
    assert plan.group_m * plan.group_n <= mm.GROUP_TILES
    assert sum(r for _, r in plan.m_blocks) == M and sum(c for _, c in plan.n_blocks) == N
    assert plan.chunk_tiles >= 1


# ---- bad input: ValueError before any instruction ---------------------------------------------


@pytest.fixture
def no_instructions(monkeypatch):
    def record(self, *a, **k):
        raise AssertionError("an instruction ran before argument validation")

    monkeypatch.setattr(RunContext, "record", record)


BAD = [
    ("lhs_rank1", lambda: (np.ones(128, np.float32), np.ones((128, 4), np.float32)), r"rank 2"),
    ("lhs_rank3", lambda: (np.ones((2, 128, 4), np.float32), np.ones((128, 4), np.float32)), r"rank 2"),
    ("rhs_rank1", lambda: (np.ones((128, 4), np.float32), np.ones(128, np.float32)), r"matmul\w*\(rhs\).*rank 2"),
    ("k_mismatch", lambda: (np.ones((128, 4), np.float32), np.ones((64, 4), np.float32)), r"\(rhs\).*K=64"),
    ("int32", lambda: (np.ones((8, 4), np.int32), np.ones((8, 4), np.int32)), r"float32, float16 or bfloat16"),
    ("mixed_dtypes", lambda: (np.ones((8, 4), np.float32), np.ones((8, 4), ml_dtypes.bfloat16)), r"one dtype"),
    ("empty_k", lambda: (np.ones((0, 4), np.float32), np.ones((0, 4), np.float32)), r"empty dimension"),
    ("empty_n", lambda: (np.ones((8, 4), np.float32), np.ones((8, 0), np.float32)), r"empty dimension"),
    ("lhs_list", lambda: ([[1.0, 2.0]], np.ones((1, 4), np.float32)), r"matmul\w*\(lhs\w*\).*type list.*an array"),
    ("rhs_float", lambda: (np.ones((8, 4), np.float32), 3.0), r"matmul\w*\(rhs\).*type float.*an array"),
]


@pytest.mark.parametrize("kernel", ["matmul", "matmul_mk"])
@pytest.mark.parametrize("name,make,match", BAD, ids=[b[0] for b in BAD])
def test_matmul_rejects_bad_input(no_instructions, kernel, name, make, match):
    a, b = make()
    if kernel == "matmul_mk" and isinstance(a, np.ndarray) and a.ndim == 2:
        a = np.ascontiguousarray(a.T)  # same K, row-major layout
    with pytest.raises(ValueError, match=match):
        simulate_kernel(getattr(mm, kernel), a, b)
