"""Per-op tests of the interpreter against NumPy (spec §5-§10)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nki_kernels.sim import SimOptions, SimWarning, nisa, nki, nl, simulate_kernel, trace_kernel
from nki_kernels.sim.trace import Matmul

F32 = np.float32
BF16 = ml_dtypes.bfloat16


def run1(body, *arrays, out_shape=None, out_dtype=nl.float32, **kw):
    """Simulate a kernel that loads every input, applies ``body`` and stores the result."""

    @nki.jit
    def k(*ins):
        tiles = [nl.load(t) for t in ins]
        r = body(*tiles)
        out = nl.ndarray(out_shape or r.shape, out_dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    return simulate_kernel(k, *arrays, **kw)


def test_unary_ops_match_numpy(rng):
    x = rng.uniform(0.1, 2.0, (128, 64)).astype(F32)
    refs = {
        "exp": np.exp,
        "log": np.log,
        "sqrt": np.sqrt,
        "rsqrt": lambda v: 1 / np.sqrt(v),
        "reciprocal": lambda v: 1 / v,
        "square": np.square,
        "negative": np.negative,
        "abs": np.abs,
        "sign": np.sign,
        "sin": np.sin,
        "cos": np.cos,
        "tanh": np.tanh,
        "arctan": np.arctan,
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "relu": lambda v: np.maximum(v, 0),
        "erf": np.vectorize(math.erf),
        "gelu": lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2))),
        "silu": lambda v: v / (1 + np.exp(-v)),
        "softplus": lambda v: np.log1p(np.exp(v)),
        "ceil": np.ceil,
        "floor": np.floor,
        "trunc": np.trunc,
    }
    for name, ref in refs.items():
        out = run1(getattr(nl, name), x)
        np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6, err_msg=name)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("add", np.add),
        ("subtract", np.subtract),
        ("multiply", np.multiply),
        ("divide", np.divide),
        ("maximum", np.maximum),
        ("minimum", np.minimum),
        ("power", np.power),
    ],
)
def test_binary_ops_and_partition_broadcast(rng, name, ref):
    a = rng.uniform(0.5, 2, (128, 32)).astype(F32)
    b = rng.uniform(0.5, 2, (128, 32)).astype(F32)
    col = rng.uniform(0.5, 2, (128, 1)).astype(F32)
    row = rng.uniform(0.5, 2, (1, 32)).astype(F32)
    fn = getattr(nl, name)
    np.testing.assert_allclose(run1(fn, a, b), ref(a, b), rtol=1e-6)
    np.testing.assert_allclose(run1(fn, a, col), ref(a, col), rtol=1e-6)  # (P,1) along free axes
    np.testing.assert_allclose(run1(fn, a, row), ref(a, row), rtol=1e-6)  # (1,F) across partitions
    # a (P,) reduction result behaves as (P,1) (partition-aligned broadcasting, spec §5)
    out = run1(lambda t: fn(t, nl.sum(t, axis=1)), a)
    np.testing.assert_allclose(out, ref(a, a.sum(axis=1, keepdims=True)), rtol=1e-5)


def test_comparisons_return_bool_and_operators(rng):
    a = rng.standard_normal((64, 16)).astype(F32)
    b = rng.standard_normal((64, 16)).astype(F32)
    out = run1(lambda x, y: nl.greater(x, y), a, b, out_dtype=nl.uint8)
    np.testing.assert_array_equal(out, (a > b).astype(np.uint8))
    out = run1(lambda x, y: (x + y) * 2.0 - y / 4.0, a, b)
    np.testing.assert_allclose(out, (a + b) * 2 - b / 4, rtol=1e-6)


def test_scalar_promotion_rules():
    # spec §5: a Python float is weakly fp32, so fp16 tile + 1.2 -> fp32; np.float16 keeps fp16
    @nki.jit
    def k(a):
        t = nl.load(a)
        r1 = t + 1.2
        r2 = nl.add(t, np.float16(1.2))
        r3 = nl.add(t, nl.load(a), dtype=nl.bfloat16)
        out = nl.ndarray((3,), nl.int32, buffer=nl.shared_hbm)
        codes = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(BF16): 2}
        for i, r in enumerate((r1, r2, r3)):
            nl.store(out[i : i + 1], codes[np.dtype(r.dtype)])
        return out

    np.testing.assert_array_equal(simulate_kernel(k, np.ones((4, 4), np.float16)), [0, 1, 2])


@pytest.mark.parametrize(
    "name,ref", [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean), ("prod", np.prod)]
)
def test_reductions_any_free_axes(rng, name, ref):
    x = rng.uniform(0.5, 1.5, (128, 4, 6, 5)).astype(F32)
    for axis in (1, (2, 3), [1, 3]):
        out = run1(lambda t, axis=axis: getattr(nl, name)(t, axis=axis, keepdims=True), x)
        np.testing.assert_allclose(
            out, ref(x, axis=axis if isinstance(axis, int) else tuple(axis), keepdims=True), rtol=1e-5
        )


def test_tensor_reduce_pooling_view_negate_and_keepdims(rng):
    x = rng.standard_normal((128, 8, 12)).astype(F32)
    out = run1(lambda t: nisa.tensor_reduce(nl.max, t.reshape((128, 8, 6, 2)), axis=(2, 3)), x, out_shape=(128, 8))
    np.testing.assert_array_equal(out, x.reshape(128, 8, 6, 2).max(axis=(2, 3)))
    out = run1(lambda t: nisa.tensor_reduce(np.add, t, axis=[1, 2], negate=True, keepdims=True), x)
    # a sum with cancellation: an absolute tolerance (the interpreter adds in the device's order)
    np.testing.assert_allclose(out, -x.astype(np.float64).sum(axis=(1, 2), keepdims=True), rtol=1e-5, atol=1e-5)


def test_tensor_tensor_scalar_and_reverse(rng):
    a = rng.uniform(1, 2, (128, 16)).astype(F32)
    b = rng.uniform(1, 2, (128, 16)).astype(F32)
    v = rng.uniform(1, 2, (128, 1)).astype(F32)
    np.testing.assert_allclose(run1(lambda x, y: nisa.tensor_tensor(x, y, op=nl.subtract), a, b), a - b)
    # a (P, 1) column operand: contested (spec Correction G), computed with a warning (E011 under strict)
    with pytest.warns(SimWarning, match="tensor_tensor operands differ"):
        np.testing.assert_allclose(run1(lambda x, y: nisa.tensor_tensor(x, y, np.multiply), a, v), a * v)
    out = run1(lambda x, s: nisa.tensor_scalar(x, nl.subtract, 1.0, reverse0=True, op1=nl.multiply, operand1=s), a, v)
    np.testing.assert_allclose(out, (1 - a) * v, rtol=1e-6)
    out = run1(lambda x: nisa.tensor_scalar(x, np.multiply, 2.0, op1=np.add, operand1=2.5, reverse1=True), a)
    np.testing.assert_allclose(out, 2.5 + a * 2, rtol=1e-6)
    out = run1(
        lambda x, y, s: nisa.scalar_tensor_tensor(data=x, op0=nl.multiply, operand0=s, op1=nl.add, operand1=y), a, b, v
    )
    np.testing.assert_allclose(out, a * v + b, rtol=1e-6)


def test_activation_bias_scale_and_reduce(rng):
    x = rng.standard_normal((128, 64)).astype(F32)
    bias = rng.standard_normal((128, 1)).astype(F32)

    @nki.jit
    def k(a, b):
        t, bb = nl.load(a), nl.load(b)
        red = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        e = nisa.activation(np.exp, t, bias=bb, scale=-0.5)
        s = nisa.activation_reduce(nl.square, t, reduce_op=nl.add, reduce_res=red)
        o1 = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, e)
        nl.store(o2, s)
        nl.store(o3, red)
        return o1, o2, o3

    e, s, r = simulate_kernel(k, x, bias)
    np.testing.assert_allclose(e, np.exp(x * -0.5 + bias), rtol=1e-5)
    np.testing.assert_allclose(s, x * x, rtol=1e-6)
    np.testing.assert_allclose(r, (x * x).sum(axis=1, keepdims=True), rtol=1e-5)


def test_scan_iota_memset_select_reciprocal(rng):
    a = rng.uniform(0.5, 1, (16, 10)).astype(F32)
    b = rng.uniform(0.5, 1, (16, 10)).astype(F32)
    out = run1(lambda x, y: nisa.tensor_tensor_scan(x, y, 0.0, np.multiply, np.add), a, b)
    ref = np.zeros_like(a)
    prev = np.zeros(16, F32)
    for i in range(10):
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    np.testing.assert_allclose(out, ref, rtol=1e-5)

    @nki.jit
    def k2(x):
        i_p, i_f = nl.mgrid[0:128, 0:64]
        io = nisa.iota(i_p * 64 + i_f, nl.int32)
        ms = nisa.memset((128, 64), 3.5, nl.float32)
        sel = nisa.affine_select(i_p >= i_f, nl.load(x), -9.0)
        rc = nisa.reciprocal(nl.load(x))
        outs = [nl.ndarray((128, 64), d, buffer=nl.shared_hbm) for d in (nl.int32, nl.float32, nl.float32, nl.float32)]
        for o, v in zip(outs, (io, ms, sel, rc), strict=True):
            nl.store(o, v)
        return tuple(outs)

    x = rng.uniform(1, 2, (128, 64)).astype(F32)
    io, ms, sel, rc = simulate_kernel(k2, x)
    np.testing.assert_array_equal(io, np.arange(128 * 64).reshape(128, 64))
    np.testing.assert_array_equal(ms, np.full((128, 64), 3.5))
    np.testing.assert_array_equal(sel, np.where(np.arange(128)[:, None] >= np.arange(64)[None, :], x, -9.0))
    np.testing.assert_allclose(rc, 1 / x, rtol=1e-6)


def test_bn_stats_aggr_and_max8(rng):
    x = rng.standard_normal((32, 512)).astype(F32)
    out = run1(lambda t: nisa.bn_aggr(nisa.bn_stats(t)), x)
    np.testing.assert_allclose(out[:, 0], x.mean(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[:, 1], x.var(axis=1), rtol=1e-4)
    out = run1(lambda t: nisa.max8(src=t), x)
    np.testing.assert_array_equal(out, -np.sort(-x, axis=1)[:, :8])


def test_nc_matmul_2d_3d_and_psum_accumulation(rng):
    a = rng.standard_normal((256, 128)).astype(F32)  # lhsT (K, M)
    b = rng.standard_normal((256, 4, 100)).astype(F32)  # 3-D moving, free 400

    @nki.jit
    def k(at, bt):
        acc = nl.zeros((128, 4, 100), nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(2):
            s = nl.load(at[kk * 128 : (kk + 1) * 128, :])
            m = nl.load(bt[kk * 128 : (kk + 1) * 128, :, :])
            acc += nisa.nc_matmul(s, m)
        out = nl.ndarray((128, 4, 100), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_copy(acc))
        return out

    out, trace = trace_kernel(k, a, b)
    np.testing.assert_allclose(out, np.einsum("km,knf->mnf", a, b), rtol=1e-4, atol=1e-4)
    mms = [e for e in trace.events if e.op == "nc_matmul"]
    assert len(mms) == 2 and all(e.payload.accumulate for e in mms)
    assert all(e.payload == Matmul(128, 128, 400, "float32", "none", True) for e in mms)
    # the accumulation writes the PSUM accumulator itself, not a temporary
    assert mms[0].writes[0].alloc_id == mms[1].writes[0].alloc_id


def test_pe_tiling_args_do_not_change_values(rng):
    a = rng.standard_normal((64, 64)).astype(F32)
    b = rng.standard_normal((64, 96)).astype(F32)
    out = run1(lambda s, m: nisa.nc_matmul(s, m, tile_position=(64, 0), tile_size=(64, 64)), a, b)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-5, atol=1e-5)


def test_transposes_and_nl_matmul(rng):
    x = rng.standard_normal((128, 96)).astype(F32)
    y = rng.standard_normal((96, 200)).astype(F32)
    np.testing.assert_array_equal(run1(lambda t: nisa.nc_transpose(t), x), x.T)
    small = x[:32, :20].copy()
    np.testing.assert_array_equal(run1(lambda t: nisa.nc_transpose(t, engine=nisa.vector_engine), small), small.T)
    np.testing.assert_array_equal(run1(nl.transpose, x), x.T)
    out = run1(lambda p, q: nl.matmul(p, q), x[:, :96].copy(), y)  # x (M=128, K=96) @ y (K=96, N=200)
    np.testing.assert_allclose(out, x[:, :96] @ y, rtol=1e-4, atol=1e-4)
    out = run1(lambda p, q: nl.matmul(p, q, transpose_x=True), y[:, :128].copy(), y)
    np.testing.assert_allclose(out, y[:, :128].T @ y, rtol=1e-4, atol=1e-4)


def test_load_transpose2d_and_dma_element_count_pairing(rng):
    x = rng.standard_normal((1024, 128)).astype(F32)
    np.testing.assert_array_equal(run1(lambda t: t, x[:128].copy()), x[:128])

    @nki.jit
    def k(a, v):
        t = nl.load_transpose2d(a)
        s = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=v)  # (128,) HBM -> (128, 1) SBUF
        acc = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=acc, src=s)
        nisa.dma_copy(dst=acc, src=s, dst_rmw_op=np.add)  # read-modify-write: doubles it
        o = nl.ndarray((128, 1024), nl.float32, buffer=nl.shared_hbm)
        nl.store(o, t)
        return o, acc

    v = rng.standard_normal(128).astype(F32)
    t, acc = simulate_kernel(k, x, v)
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_allclose(acc[:, 0], 2 * v)


def test_hbm_reshape_views_and_strided_indexing(rng):
    x = rng.standard_normal((2, 128, 8, 6)).astype(F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 48), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a[1].reshape((128, 48)))  # int-indexed sub-tensor is contiguous
        ev = nl.ndarray((128, 24), nl.float32, buffer=nl.sbuf)
        ev[...] = nisa.tensor_copy(t[:, 0:48:2])  # stepped free-axis slice
        nl.store(out[:, 0:24], ev)
        nl.store(out[:, nl.ds(24, 24)], t[:, 1:48:2])
        return out.reshape((128, 8, 6))  # reshape of the returned tensor

    out = simulate_kernel(k, x)
    flat = x[1].reshape(128, 48)
    np.testing.assert_array_equal(out.reshape(128, 48), np.concatenate([flat[:, 0::2], flat[:, 1::2]], axis=1))
    assert out.shape == (128, 8, 6)


def test_masks_with_arange_restrict_compute_and_store(rng):
    x = rng.standard_normal((128, 512)).astype(F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        t = nl.load(a[i_p, i_f])
        sq = nl.square(t, mask=(i_p < 64) & (i_f < 256))
        # the out-of-range part of the index lies under a false mask: legal, nothing written there
        nl.store(out[i_p, i_f], sq, mask=(i_p < 64) & (i_f < 256))
        return out

    np.testing.assert_allclose(simulate_kernel(k, x), x[:64, :256] ** 2, rtol=1e-6)


def test_block_dims_and_par_dim(rng):
    x = rng.standard_normal((4 * 128, 64)).astype(F32)

    @nki.jit
    def k(a):
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            buf[i] = nl.load(a[i * 128 : (i + 1) * 128, :])
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        s = nl.add(nl.add(buf[0], buf[1]), nl.add(buf[2], buf[3]))
        nl.store(out, s)
        return out

    with pytest.warns(Warning, match="block dimensions"):
        out = simulate_kernel(k, x)
    np.testing.assert_allclose(out, x.reshape(4, 128, 64).sum(axis=0), rtol=1e-5, atol=1e-6)


def test_spmd_grid_program_ids_and_shared_output():
    x = np.arange(4 * 2, dtype=F32).reshape(4, 2, 1, 1)

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 2, 1, 1), nl.float32, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        assert nl.num_programs() == 8 and nl.num_programs(1) == 2 and nl.program_ndim() == 2
        t = nl.load(a[i, j])
        # program ids are indices (docs/nki-0.1-rules.md section 11 item 11): subscripts, not Python numbers
        nl.store(out[i, j], nl.multiply(t, 10.0))
        return out

    out = simulate_kernel(k[4, 2], x)
    ref = x * 10
    np.testing.assert_array_equal(out, ref)
    out2 = simulate_kernel(k[nl.spmd_dim(nl.nc(2), 2), 2], x)
    np.testing.assert_array_equal(out2, ref)


def test_nested_jit_helper_runs_inline_with_tiles(rng):
    @nki.jit
    def helper(t):
        return nl.exp(t)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, helper(nl.load(a)))
        return out

    x = rng.standard_normal((8, 8)).astype(F32)
    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)  # a jitted kernel called with NumPy simulates


@pytest.mark.parametrize(
    "dt,tol", [(nl.bfloat16, 2**-8), (nl.float16, 2**-11), (nl.float8_e4m3, 2**-3), (nl.float8_e5m2, 2**-2)]
)
def test_rounding_at_destination_dtype(rng, dt, tol):
    x = rng.uniform(1, 2, (64, 64)).astype(F32)
    out = run1(lambda t: nl.multiply(t, 1.0, dtype=dt), x, out_dtype=nl.float32)
    ref = x.astype(np.dtype(dt)).astype(np.float64)
    np.testing.assert_array_equal(out, ref)  # RNE to dt, exactly as ml_dtypes casts
    assert np.abs(out - x).max() <= tol * 2 and np.abs(out - x).max() > 0


def test_result_rounds_once_when_assigned_to_wider_destination(rng):
    # spec §5 deferred cast: a bf16-typed instruction result assigned straight into fp32 never
    # rounds through bf16; bound to a name first, it does.
    x = rng.uniform(1, 2, (32, 32)).astype(F32)

    @nki.jit
    def k(a):
        t = nl.load(a)
        direct = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        direct[...] = nisa.tensor_scalar(t, nl.multiply, 1.0, dtype=nl.bfloat16)
        named = nisa.tensor_scalar(t, nl.multiply, 1.0, dtype=nl.bfloat16)
        o1 = nl.ndarray((32, 32), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((32, 32), nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, direct)
        nl.store(o2, named)
        return o1, o2

    d, n = simulate_kernel(k, x)
    np.testing.assert_array_equal(d, x)
    np.testing.assert_array_equal(n, x.astype(BF16).astype(F32))


def test_compat_precision_keeps_bf16_at_fp32():
    x = np.full((4, 4), 1 + 2**-12, F32)
    hw = run1(lambda t: nl.add(t, 0.0, dtype=nl.bfloat16), x, out_dtype=nl.float32)
    compat = run1(
        lambda t: nl.add(t, 0.0, dtype=nl.bfloat16), x, out_dtype=nl.float32, options=SimOptions(precision="compat")
    )
    assert np.all(hw == 1.0) and np.all(compat == x)


def test_float_to_int_truncates_toward_zero_and_saturates():
    # float -> int output casts truncate toward zero (SDK golden values)
    x = np.array([[0.5, 1.5, 2.7, -0.5, -1.7, 300.0, -300.0]], F32)
    out = run1(lambda t: nisa.tensor_copy(t, dtype=nl.int8), x, out_dtype=nl.int8)
    np.testing.assert_array_equal(out, [[0, 1, 2, 0, -1, 127, -128]])


@settings(max_examples=15, deadline=None)
@given(
    p=st.integers(1, 128),
    f=st.integers(1, 300),
    op=st.sampled_from(["add", "multiply", "maximum"]),
    bcast=st.sampled_from(["full", "col", "row"]),
)
def test_elementwise_property_shapes(p, f, op, bcast):
    rng = np.random.default_rng(p * 1000 + f)
    a = rng.standard_normal((p, f)).astype(F32)
    bshape = {"full": (p, f), "col": (p, 1), "row": (1, f)}[bcast]
    b = rng.standard_normal(bshape).astype(F32)
    out = run1(getattr(nl, op), a, b)
    np.testing.assert_allclose(out, getattr(np, op)(a, b), rtol=1e-6)


def test_loops_ranges_and_device_print(capsys):
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        for i in nl.static_range(1, 4, 2):
            t = nl.add(t, float(i))
        for i in nl.sequential_range(2):
            t[...] = nl.multiply(t, 2.0)  # in place: a tensor bound in the loop body is out of scope after it (E027)
        nl.device_print("t=", t)
        nl.store(out, t)
        return out

    out = simulate_kernel(k, np.zeros((1, 4), F32))
    np.testing.assert_array_equal(out, np.full((1, 4), 16.0))
    assert "t=" in capsys.readouterr().out


def test_tile_size_constants_and_dtypes():
    assert (
        nl.tile_size.pmax,
        nl.tile_size.psum_fmax,
        nl.tile_size.gemm_stationary_fmax,
        nl.tile_size.gemm_moving_fmax,
    ) == (128, 512, 128, 512)
    assert nl.tile_size.total_available_sbuf_size == 212984
    assert nl.fp32.min == float(np.finfo(np.float32).min)
    assert nisa.get_nc_version() == nisa.nc_version.gen3
    assert nl.static_cast(np.array([1.0, 1 + 2**-10], F32), nl.bfloat16).dtype == BF16


@pytest.mark.parametrize("dtype", [nl.bfloat16, nl.float8_e4m3, nl.float8_e5m2, nl.float16])
def test_low_precision_tiles_poison_and_round_trip(dtype):
    # ml_dtypes floats report kind 'V': poisoning and float checks must still treat them as floats
    x = np.arange(8, dtype=F32).reshape(2, 4).astype(dtype)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        t[...] = nl.load(a)
        i = nisa.tensor_copy(t, dtype=nl.int32)
        nl.store(out, nl.add(t, nisa.tensor_copy(i, dtype=a.dtype), dtype=a.dtype))
        return out

    y = simulate_kernel(k, x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.astype(F32), 2 * x.astype(F32))


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((128, 8, 111, 2), (3,)), ((128, 4, 2, 111), (2,)), ((16, 3, 5, 7), (1, 3)), ((4, 20, 3), (1,)), ((4, 40), (1,))],
)
@pytest.mark.parametrize("name", ["max", "min", "maximum", "minimum"])
def test_short_axis_max_min_fold_equals_numpy_reduce(rng, shape, axes, name):
    """The max/min fast path over short axes (ops.reduce_values) gives NumPy's reduce bit for bit, NaNs included."""
    from nki_kernels.sim.core.ops import REDUCE, reduce_values

    v = rng.standard_normal(shape).astype(F32)
    v.flat[3] = np.nan
    view = v[:, ::1]
    for keepdims in (False, True):
        got = reduce_values(name, view, axes, keepdims)
        want = REDUCE[name](view, axis=axes, keepdims=keepdims)
        assert got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)


def test_matmul_of_a_window_of_wider_rows_matches_numpy(rng):
    """nc_matmul of an image window (free axes that do not flatten without a copy: core.tensore.gemm_t
    multiplies row by row) equals a.T @ window in fp32."""
    w = rng.standard_normal((128, 64)).astype(F32)
    img = rng.standard_normal((128, 6, 40)).astype(F32)

    @nki.jit
    def k(w_in, x_in):
        out = nl.ndarray((64, 3, 36), nl.float32, buffer=nl.shared_hbm)
        wt = nl.load(w_in)
        x = nl.load(x_in)
        ps = nl.zeros((64, 3, 36), nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(wt, x[:, 2:5, 3:39])
        nl.store(out, nisa.tensor_copy(ps))
        return out

    got = simulate_kernel(k, w, img)
    assert np.isfinite(got).all() and np.abs(got).sum() > 0
    want = np.einsum("km,krc->mrc", w.astype(np.float64), img[:, 2:5, 3:39].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
