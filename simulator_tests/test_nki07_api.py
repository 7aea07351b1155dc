"""NKI 0.7 front end (``nki_kernels.sim.nki07``): positive semantics, one test per rule class of
docs/nki-0.7-spec.md (rule ids in the test names' docstrings)."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import SimOptions, SimWarning
from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check(out, ref, rtol=1e-5, atol=1e-5):
    out = np.asarray(out, dtype=np.float64)
    assert out.shape == np.shape(ref)
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


# ---- K1-K6: kernels, launch, outputs -------------------------------------------------------------
@nki.jit
def _add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_jit_simulate_and_direct_call():
    """K1, K2, I1: dst-first ISA calls; nki.simulate(kernel)(*args) and a direct call agree."""
    a, b = rand(128, 512), rand(128, 512)
    check(nki.simulate(_add)(a, b), a + b)
    check(_add(a, b), a + b)


def test_isa_calls_return_none():
    """I1: every ISA call returns nothing."""
    seen = []

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        seen.append(nisa.dma_copy(dst=t, src=a))
        seen.append(nisa.activation(dst=t, op=nl.exp, data=t))
        seen.append(nisa.dma_copy(dst=out, src=t))
        return out

    a = rand(16, 8)
    check(k(a), np.exp(a), rtol=1e-5)
    assert seen == [None, None, None]


def test_jit_mode_kwarg_ignored_and_plain_function():
    """K1: mode= is ignored; K2: nki.simulate wraps a plain function."""

    def plain(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), 2.0))
        return out

    a = rand(8, 4)
    check(nki.simulate(plain)(a), 2 * a)
    check(nki.jit(mode="simulation")(plain)(a), 2 * a)


def test_lnc_launch_program_id():
    """K4: kernel[2] runs on two logical cores; program_id()/num_programs() are the core index."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        pid, n = nl.program_id(), nl.num_programs()
        rows = a.shape[0] // n
        t = nl.load(a[pid * rows : (pid + 1) * rows, :])
        nl.store(out[pid * rows : (pid + 1) * rows, :], nl.add(t, float(pid)))
        return out

    a = rand(256, 64)
    ref = a.copy()
    ref[128:] += 1.0
    check(nki.simulate(k[2])(a), ref)
    check(k(a[:128]), a[:128])  # LNC=1 by default: program_id() == 0


def test_lnc_instances_run_in_lockstep():
    """K4: instances run concurrently (one NKI call at a time, round robin): every core may first
    initialise the whole shared output and then write its own shard (nki-library's pattern)."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        zero = nl.zeros(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=out, src=zero)  # every instance clears everything
        pid = nl.program_id(0)
        rows = a.shape[0] // nl.num_programs()
        t = nl.load(a[pid * rows : (pid + 1) * rows, :])
        nl.store(out[pid * rows : (pid + 1) * rows, :], t)
        return out

    a = rand(128, 16)
    check(k[2](a), a)
    check(k[4](a), a)

    @nki.jit
    def bad(a):
        if nl.program_id(0) == 1:
            nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)  # E001 in instance 1 only
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    with pytest.raises(ValueError, match=r"\[E001\]"):
        bad[2](a)


def test_sub_kernel_inline_and_tuple_outputs():
    """K5: a function (or jitted kernel) called inside a kernel runs inline on tiles; K6 tuples out."""

    def helper(t):
        r = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=3.0)
        return r

    @nki.jit
    def k(a):
        o1 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(o1, helper(t))
        nl.store(o2, t)
        return o1, o2

    a = rand(32, 16)
    o1, o2 = k(a)
    check(o1, 3 * a)
    check(o2, a)


def test_kernel_writes_its_arguments():
    """K8: kernel arguments may be written (nki-library kernels fill output arguments in place)."""

    @nki.jit
    def k(a, out):
        nisa.dma_copy(dst=out, src=a)
        return out

    a = rand(16, 8)
    check(k(a, np.zeros_like(a)), a)


def test_find_index8_match_replace8_stream_shuffle():
    """nc_find_index8 (duplicates advance, absent -> all ones), nc_match_replace8, nc_stream_shuffle."""
    data = np.tile(np.array([1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8], np.float32), (2, 1))
    vals = np.tile(np.array([3, 8, 8, 8, 8, 8, 8, 8], np.float32), (2, 1))
    vals[1, 0] = 5.0  # absent in partition 1

    @nki.jit
    def k(d, v, x):
        o1 = nl.ndarray((2, 8), nl.uint32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((2, 11), nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((2, 8), nl.uint32, buffer=nl.shared_hbm)
        o4 = nl.ndarray((64, 4), nl.float32, buffer=nl.shared_hbm)
        dt, vt = nl.load(d), nl.load(v)
        i = nl.ndarray((2, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=i, data=dt, vals=vt)
        nl.store(o1, i)
        r = nl.ndarray((2, 11), nl.float32, buffer=nl.sbuf)
        j = nl.ndarray((2, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=r, data=dt, vals=vt, imm=-1.0, dst_idx=j)
        nl.store(o2, r)
        nl.store(o3, j)
        s = nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=s, src=nl.load(x), shuffle_mask=[31 - p for p in range(32)])
        nl.store(o4, s)
        return o1, o2, o3, o4

    x = rand(64, 4)
    o1, o2, o3, o4 = k(data, vals, x)
    np.testing.assert_array_equal(o1[0], [2, 4, 5, 6, 7, 8, 9, 10])
    assert o1[1, 0] == 0xFFFFFFFF
    np.testing.assert_array_equal(o3[0], [2, 10, 9, 8, 7, 6, 5, 4])  # the ISA docstring's example
    np.testing.assert_array_equal(o2[0], [1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1])
    check(o4, np.concatenate([x[:32][::-1], x[32:][::-1]]))


def test_torch_in_torch_out():
    """K2: nki.simulate accepts CPU torch tensors and returns torch tensors."""
    torch = pytest.importorskip("torch")
    a = torch.randn(128, 64)
    out = nki.simulate(_add)(a, a)
    assert isinstance(out, torch.Tensor)
    check(out.numpy(), 2 * a.numpy())


def test_nki_simulator_env(monkeypatch):
    """K3: NKI_SIMULATOR=1 is recognised (every call simulates here)."""
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    assert nki.simulator_requested()
    monkeypatch.setenv("NKI_SIMULATOR", "0")
    assert not nki.simulator_requested()


# ---- T1: poison ------------------------------------------------------------------------------------
def test_ndarray_uninitialised_is_poisoned():
    """T1: nl.ndarray is uninitialised: reading it shows NaN poison; nl.zeros is zero."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:2], src=a[:, 0:2])  # half of it written
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.warns(SimWarning, match="never-written"):
        out = k(rand(8, 4))
    assert np.isfinite(out[:, :2]).all() and np.isnan(out[:, 2:]).all()
    out = nki.simulate(k, options=SimOptions(poison=False))(rand(8, 4))
    assert np.isfinite(out).all()


# ---- V1-V4: indexing and views ---------------------------------------------------------------------
def test_indexing_rules():
    """V1: on-chip int on the partition axis keeps it; results >= 2-D; HBM ints drop the axis; ds."""
    shapes = {}

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a[1])  # HBM (2, 4, 8) -> (4, 8)
        shapes["hbm_int"] = a[1].shape
        shapes["part_int"] = t[2].shape
        shapes["free_int"] = t[:, 3].shape
        shapes["ds"] = t[nl.ds(1, 2), ...].shape
        shapes["neg"] = t[-1, -2:].shape
        shapes["step"] = t[:, 0:8:2].shape
        nl.store(out, t)
        return out

    a = rand(2, 4, 8)
    check(k(a), a[1])
    assert shapes == {
        "hbm_int": (4, 8),
        "part_int": (1, 8),
        "free_int": (4, 1),
        "ds": (2, 8),
        "neg": (1, 2),
        "step": (4, 4),
    }


def test_views_share_storage():
    """V3: permute / reshape / rearrange / broadcast / slice / select / expand / squeeze / flatten."""

    @nki.jit
    def k(a):
        out = nl.ndarray((16, 4, 6), a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)  # (16, 24)
        v = t.reshape((16, 4, 6))
        assert v.reshape_dim(2, (2, 3)).shape == (16, 4, 2, 3)
        assert v.flatten_dims(1, 2).shape == (16, 24)
        assert v.expand_dim(1).squeeze_dim(1).shape == (16, 4, 6)
        assert v.slice(2, 1, 5, 2).shape == (16, 4, 2)
        assert v.select(1, 2).shape == (16, 6)
        p = v.permute((0, 2, 1))  # (16, 6, 4), a view
        assert p.shape == (16, 6, 4) and not p.is_contiguous() and v.is_contiguous()
        r = t.rearrange(("p", ("h", "w")), ("p", "w", "h"), {"h": 4})
        assert r.shape == (16, 6, 4)
        o = nl.ndarray((16, 4, 6), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o.permute((0, 2, 1)), src=r)  # write through a permuted view
        nl.store(out, o)
        return out

    a = rand(16, 24)
    check(k(a), a.reshape(16, 4, 6))


def test_broadcast_view_and_access_pattern():
    """V3 broadcast (stride 0) and V4 .ap(pattern, offset) over the base storage."""

    @nki.jit
    def k(a):
        out = nl.ndarray((8, 3, 4), a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((8, 2), a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)  # (8, 4)
        b = t.expand_dim(1).broadcast(1, 3)  # (8, 3, 4)
        o = nl.ndarray((8, 3, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=b)
        nl.store(out, o)
        # every other element of each row, starting at element 1: pattern over the (8, 4) storage
        nisa.dma_copy(dst=out2, src=a.ap(pattern=[[4, 8], [2, 2]], offset=1))
        return out, out2

    a = rand(8, 4)
    o1, o2 = k(a)
    check(o1, np.broadcast_to(a[:, None, :], (8, 3, 4)))
    check(o2, a[:, 1::2])


def test_view_dtype_reinterpret():
    """V3 view(dtype): reinterpretation, the last dim scaled by the size ratio."""

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), nl.uint16, buffer=nl.shared_hbm)
        t = nl.load(a)  # (4, 4) float32
        u = t.view(nl.uint16)
        assert u.shape == (4, 8)
        nisa.dma_copy(dst=out, src=u)
        return out

    a = rand(4, 4)
    np.testing.assert_array_equal(k(a), a.view(np.uint16))


# ---- I2-I4: nc_matmul and accumulation --------------------------------------------------------------
def test_matmul_auto_accumulate():
    """I3: accumulate=None: the first write to a PSUM location overwrites, later ones accumulate."""

    @nki.jit
    def k(lhsT, rhs):
        K, M = lhsT.shape
        N = rhs.shape[1]
        out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)  # poisoned: must be overwritten first
        for k_ in nl.affine_range(K // 128):
            s = nl.load(lhsT[k_ * 128 : (k_ + 1) * 128, :])
            m = nl.load(rhs[k_ * 128 : (k_ + 1) * 128, :])
            nisa.nc_matmul(acc, s, m)
        res = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nl.store(out, res)
        return out

    a, b = rand(384, 64), rand(384, 256)
    check(k(a, b), a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_matmul_explicit_accumulate_flag():
    """I3: accumulate=False overwrites (even a written location), True accumulates."""

    @nki.jit
    def k(lhsT, rhs):
        out = nl.ndarray((64, 128), nl.float32, buffer=nl.shared_hbm)
        s, m = nl.load(lhsT), nl.load(rhs)
        acc = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        for i in range(3):
            nisa.nc_matmul(acc, s, m, accumulate=(i > 0))
        nisa.nc_matmul(acc[:, 0:64], s, m[:, 0:64], accumulate=False)  # restart half of it
        res = nl.ndarray((64, 128), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nl.store(out, res)
        return out

    a, b = rand(128, 64), rand(128, 128)
    ref = 3 * (a.T.astype(np.float64) @ b)
    ref[:, :64] /= 3
    check(k(a, b), ref, rtol=1e-4, atol=1e-3)


def test_matmul_onto_memset_psum_warns_and_accumulates():
    """I4: accumulating onto PSUM initialised by a non-matmul instruction warns (undefined on trn2)."""

    @nki.jit
    def k(lhsT, rhs):
        out = nl.ndarray((32, 64), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((32, 64), nl.float32, buffer=nl.psum)
        s, m = nl.load(lhsT), nl.load(rhs)
        nisa.nc_matmul(acc, s, m)
        nisa.nc_matmul(acc, s, m)
        nl.store(out, nl.copy(acc))
        return out

    a, b = rand(128, 32), rand(128, 64)
    with pytest.warns(SimWarning, match="non-matmul"):
        out = k(a, b)
    check(out, 2 * (a.T.astype(np.float64) @ b), rtol=1e-4, atol=1e-3)


def test_matmul_fp8_double_row():
    """I2 performance mode double_row: [K, 2, M] x [K, 2, N] contracted over K and the 2-row axis."""
    f8 = ml_dtypes.float8_e4m3  # trn2's FP8 e4m3 (nl.float8_e4m3)
    a = rand(128, 2, 32).astype(f8)
    b = rand(128, 2, 64).astype(f8)

    @nki.jit
    def k(s, m):
        out = nl.ndarray((32, 64), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, nl.load(s), nl.load(m), perf_mode=nisa.matmul_perf_mode.double_row)
        nl.store(out, nl.copy(acc))
        return out

    ref = np.einsum("krm,krn->mn", a.astype(np.float64), b.astype(np.float64))
    check(k(a, b), ref, rtol=1e-5, atol=1e-4)


def test_transpose_engines():
    """I7: nc_transpose on TensorE (SBUF -> PSUM) and VectorE (<= 32x32); dma_transpose (I6)."""

    @nki.jit
    def k(a):
        o1 = nl.ndarray((64, 128), a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((32, 16), a.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((64, 128), a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)  # (128, 64)
        p = nl.ndarray((64, 128), a.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=p, data=t)
        nl.store(o1, nl.copy(p))
        v = nl.ndarray((32, 16), a.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(dst=v, data=t[0:16, 0:32], engine=nisa.engine.vector)
        nl.store(o2, v)
        d = nl.ndarray((64, 128), a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=a)
        nl.store(o3, d)
        return o1, o2, o3

    a = rand(128, 64)
    o1, o2, o3 = k(a)
    check(o1, a.T)
    check(o2, a[:16, :32].T)
    check(o3, a.T)


# ---- I8-I12: compute instructions --------------------------------------------------------------------
def test_compute_instructions_cast_into_dst():
    """I8: fp32 math, result cast to dst.dtype; tensor_scalar, activation with bias/scale, reciprocal."""

    @nki.jit
    def k(a, bias):
        o = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.load(a)
        b = nl.load(bias)
        r = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0)
        e = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.tanh, data=r, bias=b, scale=0.5)
        q = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.reciprocal(dst=q, data=e)
        nl.store(o, q)
        return o

    a, bias = rand(64, 32), rand(64, 1)
    r = (2 * a + 1).astype(ml_dtypes.bfloat16).astype(np.float32)
    ref = 1 / np.tanh(0.5 * r + bias)
    out = k(a, bias)
    assert out.dtype == ml_dtypes.bfloat16
    check(out.astype(np.float32), ref.astype(ml_dtypes.bfloat16).astype(np.float32), rtol=1e-2, atol=1e-2)


def test_activation_reduce_regs_and_tensor_reduce():
    """I8/I9: activation reduce_res with reset_reduce; tensor_reduce over trailing axes."""

    @nki.jit
    def k(a):
        o1 = nl.ndarray((32, 1), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((32, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)  # (32, 4, 8)
        e = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((32, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce
        )
        nl.store(o1, s)
        m = nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=2)
        nl.store(o2, m)
        return o1, o2

    a = rand(32, 4, 8)
    o1, o2 = k(a)
    check(o1, np.exp(a).sum(axis=(1, 2))[:, None], rtol=1e-5)
    check(o2, a.max(axis=2))


def test_iota_and_affine_select_causal_mask():
    """I11 iota values; I12 affine_select with a causal predicate (p - f >= 0)."""

    @nki.jit
    def k(a):
        o1 = nl.ndarray((8, 6), nl.int32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        it = nl.ndarray((8, 6), nl.int32, buffer=nl.sbuf)
        nisa.iota(it, [[1, 6]], offset=3, channel_multiplier=10)
        nl.store(o1, it)
        t = nl.load(a)
        m = nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf)
        nisa.affine_select(
            dst=m,
            pattern=[[-1, 8]],
            channel_multiplier=1,
            on_true_tile=t,
            on_false_value=-9984.0,
            cmp_op=nl.greater_equal,
        )
        nl.store(o2, m)
        return o1, o2

    a = rand(8, 8)
    o1, o2 = k(a)
    np.testing.assert_array_equal(o1, 3 + 10 * np.arange(8)[:, None] + np.arange(6)[None, :])
    check(o2, np.where(np.tril(np.ones((8, 8))) > 0, a, -9984.0))


def test_range_select_with_max_reduce():
    """range_select: keep free indices with bound0 <= range_start + i < bound1, max-reduce the rest."""

    @nki.jit
    def k(a, lo, hi):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        om = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        mx = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(
            dst=d,
            on_true_tile=nl.load(a),
            comp_op0=nl.greater_equal,
            comp_op1=nl.less,
            bound0=nl.load(lo),
            bound1=nl.load(hi),
            reduce_op=nl.maximum,
            reduce_res=mx,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            range_start=4,
        )
        nl.store(o, d)
        nl.store(om, mx)
        return o, om

    a = rand(8, 16)
    lo = np.full((8, 1), 6, np.float32)
    hi = (8 + np.arange(8, dtype=np.float32)).reshape(8, 1)
    o, om = k(a, lo, hi)
    i = 4 + np.arange(16)[None, :]
    ref = np.where((i >= lo) & (i < hi), a, np.finfo(np.float32).min)
    np.testing.assert_array_equal(o, ref)
    np.testing.assert_array_equal(om, ref.max(axis=1, keepdims=True))


def test_memset_int_and_copy_predicated():
    """I10 memset with an int value; tensor_copy_predicated keeps dst where the predicate is 0."""

    @nki.jit
    def k(a, pred):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        oi = nl.ndarray((4, 4), nl.int32, buffer=nl.shared_hbm)
        i = nl.ndarray((4, 4), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=i, value=7)
        nl.store(oi, i)
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=d, value=-1.0)
        nisa.tensor_copy_predicated(dst=d, src=nl.load(a), predicate=nl.load(pred))
        nl.store(o, d)
        return o, oi

    a = rand(16, 8)
    p = (RNG.random((16, 8)) > 0.5).astype(np.uint8)
    o, oi = k(a, p)
    check(o, np.where(p != 0, a, -1.0))
    np.testing.assert_array_equal(oi, np.full((4, 4), 7))


# ---- L1-L6: nki.language ------------------------------------------------------------------------------
def test_language_ops():
    """L1-L2, L6: nl.* ops return new SBUF tiles; load/store; reductions; nl.matmul(transpose_x=True)."""

    @nki.jit
    def k(a, b):
        o1 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((a.shape[0], 1), a.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        z = nl.maximum(nl.exp(x) * 2.0, y) - nl.sigmoid(x)
        assert z.buffer == nl.sbuf
        nl.store(o1, z)
        nl.store(o2, nl.sum(x, axis=1, keepdims=True))
        p = nl.matmul(x[:, 0:64], y[:, 0:64], transpose_x=True)
        assert p.buffer == nl.psum
        nl.store(o3, nl.copy(p))
        return o1, o2, o3

    a, b = rand(128, 64), rand(128, 64)
    o1, o2, o3 = k(a, b)
    check(o1, np.maximum(np.exp(a) * 2, b) - 1 / (1 + np.exp(-a)), rtol=1e-5)
    check(o2, a.sum(axis=1, keepdims=True), rtol=1e-4)
    check(o3, a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_language_divide_and_broadcast_warn():
    """L3, L4: nl.divide and tile broadcasting do not compile on hardware: warnings, not errors."""

    @nki.jit
    def k(a, b):
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(o, nl.divide(nl.load(a), nl.load(b)))
        return o

    a, b = rand(16, 8), rand(16, 1) + 3
    with pytest.warns(SimWarning) as rec:
        out = k(a, b)
    msgs = " ".join(str(w.message) for w in rec)
    assert "divide" in msgs and "broadcast" in msgs
    check(out, a / b, rtol=1e-5)


def test_abs_max_docstring_semantics_and_bool():
    """NL abs_max: the signed value of larger magnitude, y on ties; bool(tile) = all non-zero."""

    @nki.jit
    def k():
        a = nl.full((8, 16), -5.0, dtype=nl.float32, buffer=nl.sbuf)
        b = nl.full((8, 1), 3.0, dtype=nl.float32, buffer=nl.sbuf)
        assert nl.equal(nl.abs_max(a, b), nl.full((8, 16), -5.0, dtype=nl.float32, buffer=nl.sbuf))
        assert not nl.equal(a, nl.full((8, 16), 1.0, dtype=nl.float32, buffer=nl.sbuf))
        return None

    assert k() is None


def test_rand_and_random_seed():
    """nl.rand: uniform [0, 1); the same nl.random_seed gives the same values (NL examples)."""

    @nki.jit
    def k():
        o = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
        nl.random_seed(seed)
        nl.store(o[0], nl.rand((128, 64), dtype=nl.float32))
        nl.random_seed(seed)
        nl.store(o[1], nl.rand((128, 64), dtype=nl.float32))
        return o

    o = k()
    assert (o >= 0).all() and (o < 1).all() and o.std() > 0.2
    np.testing.assert_array_equal(o[0], o[1])


# ---- C1-C5: loops ------------------------------------------------------------------------------------
def test_fori_and_while_loops_with_registers():
    """C2 fori_loop (body returns nothing), C3 while_loop on a register, C5 register_load/store."""

    @nki.jit
    def k(a, count):
        out = nl.ndarray((1, 8), a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 8), nl.float32, buffer=nl.sbuf)
        row = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)

        def body(i):
            nisa.dma_copy(dst=row, src=a.ap([[8, 1], [1, 8]], scalar_offset=i, indirect_dim=0))
            nisa.tensor_tensor(dst=acc, data1=acc, data2=row, op=nl.add)

        nl.fori_loop(0, a.shape[0], body)
        nl.store(out, acc)

        c = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c, src=count)
        n = nl.zeros((1, 1), nl.int32, buffer=nl.sbuf)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c)

        def wbody(r):
            nisa.tensor_scalar(dst=c, data=c, op0=nl.subtract, operand0=1)
            nisa.tensor_scalar(dst=n, data=n, op0=nl.add, operand0=1)
            nisa.register_load(r, c)
            return r

        nl.while_loop(reg, wbody)
        nl.store(out2, n)
        return out, out2

    a = rand(5, 8)
    o, n = k(a, np.array([[4]], np.int32))
    check(o, a.sum(axis=0, keepdims=True), rtol=1e-5)
    assert int(n[0, 0]) == 4


def test_loop_kinds_unrolled():
    """C1: range / affine_range / sequential_range / static_range iterate like range."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in range(2):
            for j in nl.affine_range(2):
                for r in nl.sequential_range(0, 4, 2):
                    for s in nl.static_range(2):
                        rr = i * 8 + j * 4 + r + s
                        nl.store(out[rr : rr + 1, :], nl.load(a[rr : rr + 1, :]))
        return out

    a = rand(16, 4)
    check(k(a), a)


def test_shuffled_affine_range_exposes_dependency():
    """The 0.1 front end's shuffle diagnostic applies to nl.affine_range in 0.7 code too."""

    @nki.jit
    def k(a):
        out = nl.ndarray((1, 4), a.dtype, buffer=nl.shared_hbm)
        last = nl.ndarray((1, 4), a.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(8):  # loop-carried: the last writer wins
            nisa.dma_copy(dst=last, src=a[i : i + 1, :])
        nl.store(out, last)
        return out

    a = rand(8, 4)
    check(k(a), a[7:8])
    outs = {tuple(nki.simulate(k, options=SimOptions(shuffle_affine_seed=s))(a).ravel()) for s in range(6)}
    assert len(outs) > 1


# ---- trace and cost model ------------------------------------------------------------------------------
def test_trace_matches_01_front_end_and_estimate_works():
    """The same instruction trace as the 0.1 front end, so nki_kernels.perf.estimate works unchanged."""
    from nki_kernels.perf import estimate
    from nki_kernels.sim import isa as nisa01
    from nki_kernels.sim import language as nl01
    from nki_kernels.sim import nki as nki01
    from nki_kernels.sim import trace_kernel

    @nki01.jit
    def k01(lhsT, rhs):
        out = nl01.ndarray((128, 512), nl01.float32, buffer=nl01.shared_hbm)
        acc = nl01.zeros((128, 512), nl01.float32, buffer=nl01.psum)
        for k_ in nl01.affine_range(2):
            s = nl01.load(lhsT[k_ * 128 : (k_ + 1) * 128, :])
            m = nl01.load(rhs[k_ * 128 : (k_ + 1) * 128, :])
            acc += nisa01.nc_matmul(s, m)
        res = nl01.ndarray((128, 512), nl01.float32, buffer=nl01.sbuf)
        res[...] = nisa01.tensor_copy(acc)
        nl01.store(out, res)
        return out

    @nki.jit
    def k07(lhsT, rhs):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        for k_ in nl.affine_range(2):
            s = nl.load(lhsT[k_ * 128 : (k_ + 1) * 128, :])
            m = nl.load(rhs[k_ * 128 : (k_ + 1) * 128, :])
            nisa.nc_matmul(acc, s, m)
        res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nl.store(out, res)
        return out

    a, b = rand(256, 128), rand(256, 512)
    o1, t1 = trace_kernel(k01, a, b)
    o7, t7 = trace_kernel(k07, a, b)
    check(o7, o1, rtol=1e-5)
    sig = [(e.op, e.engine) for e in t7.events]
    assert sig == [(e.op, e.engine) for e in t1.events if e.op != "memset"]
    assert [e.payload.accumulate for e in t7.events if e.op == "nc_matmul"] == [False, True]
    assert all(e.file.endswith("test_nki07_api.py") for e in t7.events)
    est = estimate(k07, a, b)
    assert est.latency_us > 0


def test_error_points_at_user_line():
    """Coded errors carry the kernel's own line."""

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)  # 128x32 vs 128x64: element counts differ
        return a

    with pytest.raises(ValueError, match=r"\[E011\]") as ei:
        k(rand(128, 32))
    assert ei.value.where.startswith("test_nki07_api.py:")


def test_explicit_address_is_not_counted_twice():
    """T1 address=: placed tensors (reused addresses) do not add to live SBUF; out of range is E006."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        tiles = [nl.ndarray((128, 16384), nl.float32, buffer=nl.sbuf, address=(0, 0)) for _ in range(8)]
        for t in tiles:
            nisa.memset(dst=t, value=1.0)
        nl.store(out, tiles[0][0 : a.shape[0], 0 : a.shape[1]])
        return out

    check(k(rand(4, 4)), np.ones((4, 4)))

    @nki.jit
    def k2(a):
        nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf, address=(0, 210000))
        return a

    with pytest.raises(ValueError, match=r"\[E006\]"):
        k2(rand(2, 2))


def test_capacity_is_checked():
    """The same SBUF capacity accounting as the 0.1 front end: a warning for 0.7 code (the 0.2+
    compiler frees tiles after their last use), E006 under strict."""

    @nki.jit
    def k(a):
        tiles = [nl.ndarray((128, 16384), nl.float32, buffer=nl.sbuf) for _ in range(4)]
        for t in tiles:
            nisa.memset(dst=t, value=0.0)
        return a

    with pytest.warns(SimWarning, match=r"\[E006 under strict\] pm.sbuf_spill"):
        k(rand(2, 2))
    with pytest.raises(ValueError, match=r"\[E006\]"):
        nki.simulate(k, options=SimOptions(strict=True))(rand(2, 2))


def test_no_warnings_on_clean_kernel():
    a, b = rand(128, 512), rand(128, 512)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(_add(a, b), a + b)


def _dma_compute(reduce_op=nl.add, scales=None, out_dtype=nl.float32):
    """Two loads, then ``dma_compute(out, [x, y], reduce_op, scales)`` into an HBM output of ``out_dtype``."""

    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, out_dtype, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        y = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=y, src=b)
        nisa.dma_compute(out, [x, y], reduce_op=reduce_op, scales=scales)
        return out

    return k


def test_dma_compute_is_one_dma_that_reads_every_source():
    """I5b: dst = srcs[0] + srcs[1] in fp32 on the DMA engines, rounded once to dst's dtype; its event reads both
    sources (the cost model orders it after both loads) and the estimate costs it as a DMA."""
    from nki_kernels.perf.model import estimate_trace
    from nki_kernels.sim.nki07.kernel import trace as trace07

    a, b = rand(128, 64), rand(128, 64)
    out, trace = trace07(_dma_compute(out_dtype=nl.bfloat16), a, b)
    got = np.asarray(out).astype(np.float32)
    assert np.isfinite(got).all() and np.any(got != 0)
    want = (a + b).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    ev = [e for e in trace.events if e.op == "dma_compute"]
    assert len(ev) == 1 and ev[0].engine == "DMA"
    loads = [e for e in trace.events if e.op == "dma_copy"]
    assert {r.alloc_id for r in ev[0].reads} == {w.alloc_id for e in loads for w in e.writes}
    assert estimate_trace(trace).latency_us > 0


@pytest.mark.parametrize(
    "reduce_op,scales,arg",
    [(nl.multiply, None, "reduce_op"), (nl.add, [1.0, 2.0], "scales")],
    ids=["multiply", "scale-2"],
)
def test_dma_compute_adds_with_unit_scales_only(reduce_op, scales, arg):
    """I5b, "Currently, only nl.add is supported for reduce_op, and all values in scales must be 1.0" (aws-neuron-sdk
    @81ce03ae nki/api/nki/isa/__init__.py): E021; the fixed twin (nl.add, scales None or all 1.0) runs and adds."""
    a, b = rand(128, 64), rand(128, 64)
    with pytest.raises(ValueError, match=rf"\[E021\] dma_compute\({arg}\)"):
        _dma_compute(reduce_op, scales)(a, b)
    for fixed in (None, [1.0, 1.0]):
        out = np.asarray(_dma_compute(nl.add, fixed)(a, b))
        assert np.isfinite(out).all() and np.any(out != 0)
        np.testing.assert_array_equal(out, a + b)
