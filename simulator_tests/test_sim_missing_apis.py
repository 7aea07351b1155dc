"""The NKI 0.1 APIs added for conformance (APIs the SDK's own tests use): one test per API, with our
own small kernels, against NumPy.  Semantics are from the 2.26 docs / 2.27 docstrings cited in
the modules (sim/indirect.py, sim/rng.py, sim/select.py, sim/matmul_perf_mode.py)."""

from __future__ import annotations

import logging

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import SimWarning, install_neuronxcc_alias, nisa, nki, nl, simulate_kernel, trace_kernel
from nki_kernels.sim.core.errors import SimError


def _finite_nonzero(a):
    a = np.asarray(a, dtype=np.float64)
    assert np.all(np.isfinite(a)) and np.any(a != 0)


# ---------------------------------------------------------------------------------------
# indirect DMA
# ---------------------------------------------------------------------------------------


def test_indirect_load_gathers_rows_named_by_an_index_tile(rng):
    data = rng.standard_normal((40, 24)).astype(np.float32)
    rows = np.array([39, 0, 7, 7, 12, 3], dtype=np.int32)

    @nki.jit
    def k(d, idx):
        out = nl.ndarray((6, 24), d.dtype, buffer=nl.shared_hbm)
        it = nl.load(idx.reshape((6, 1)))
        nl.store(out, nl.load(d[it, nl.arange(24)[None, :]]))
        return out

    out, tr = trace_kernel(k, data, rows)
    _finite_nonzero(out)
    np.testing.assert_array_equal(out, data[rows])
    gather = [e for e in tr.events if e.op == "dma_copy" and e.payload.indirect]
    assert len(gather) == 1 and len(gather[0].reads) == 2  # the data and the index tile


def test_indirect_store_scatters_rows(rng):
    src = rng.standard_normal((5, 16)).astype(np.float32)
    rows = np.array([9, 1, 4, 0, 6], dtype=np.int32)

    @nki.jit
    def k(s, idx):
        out = nl.ndarray((10, 16), s.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.zeros((10, 16), nl.float32))
        it = nl.load(idx.reshape((5, 1)))
        nl.store(out[it, nl.arange(16)[None, :]], nl.load(s))
        return out

    out = simulate_kernel(k, src, rows)
    ref = np.zeros((10, 16), np.float32)
    ref[rows] = src
    _finite_nonzero(out)
    np.testing.assert_array_equal(out, ref)


def _dma_kernel(oob_mode, rmw=None, stride=3, n_rows=20):
    @nki.jit
    def k(d):
        out = nl.ndarray((8, 16), d.dtype, buffer=nl.shared_hbm)
        idx = nisa.iota(stride * nl.arange(8)[:, None], dtype=nl.int32)
        t = nisa.memset((8, 16), -1.0, nl.float32)
        nisa.dma_copy(dst=t, src=d[idx, nl.arange(16)[None, :]], oob_mode=oob_mode, dst_rmw_op=rmw)
        nl.store(out, t)
        return out

    return k


def test_dma_copy_oob_skip_leaves_destination_rows(rng):
    d = rng.standard_normal((20, 16)).astype(np.float32)
    out = simulate_kernel(_dma_kernel(nisa.oob_mode.skip), d)
    ref = np.full((8, 16), -1.0, np.float32)
    ok = 3 * np.arange(8) < 20
    ref[ok] = d[3 * np.arange(8)[ok]]
    np.testing.assert_array_equal(out, ref)


def test_dma_copy_oob_error_raises_exactly_index_error_with_numpy_message(rng):
    d = rng.standard_normal((20, 16)).astype(np.float32)
    with pytest.raises(IndexError) as ei:
        simulate_kernel(_dma_kernel(nisa.oob_mode.error), d)
    assert type(ei.value) is IndexError
    # first out-of-bounds point: row 21 (i = 7), column 0 of the flattened 20x16 tensor
    assert str(ei.value) == "index 336 is out of bounds for axis 0 with size 320"


def test_dma_copy_indirect_rmw_add_and_its_oob_restriction(rng):
    d = rng.standard_normal((20, 16)).astype(np.float32)
    out = simulate_kernel(_dma_kernel(nisa.oob_mode.error, rmw=np.add, stride=2), d)
    np.testing.assert_allclose(out, d[2 * np.arange(8)] - 1.0, rtol=1e-6)
    with pytest.raises(SimError, match="dst_rmw_op allows only oob_mode"):
        simulate_kernel(_dma_kernel(nisa.oob_mode.skip, rmw=np.add, stride=2), d)


def test_index_tile_must_be_an_integer_sbuf_tile(rng):
    @nki.jit
    def k(d):
        bad = nl.zeros((4, 1), nl.float32)
        return nl.load(d[bad, nl.arange(8)[None, :]])

    with pytest.raises(TypeError, match="E009.*not an integer type"):
        simulate_kernel(k, rng.standard_normal((8, 8)).astype(np.float32))


# ---------------------------------------------------------------------------------------
# gathers
# ---------------------------------------------------------------------------------------


def test_gather_flattened_is_take_along_the_flattened_free_axis(rng):
    data = rng.standard_normal((4, 3, 5)).astype(np.float32)
    idx = rng.integers(0, 15, size=(4, 2, 6)).astype(np.uint32)

    @nki.jit
    def k(d, i):
        out = nl.ndarray((4, 2, 6), d.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.gather_flattened(nl.load(d), nl.load(i)))
        return out

    out = simulate_kernel(k, data, idx)
    ref = np.take_along_axis(data.reshape(4, -1), idx.reshape(4, -1).astype(np.int64), axis=1).reshape(4, 2, 6)
    _finite_nonzero(out)
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(IndexError, match="E008"):
        simulate_kernel(k, data, np.full((4, 2, 6), 15, np.uint32))


def test_local_gather_per_16_partition_group(rng):
    src = rng.standard_normal((32, 10, 2)).astype(np.float32)
    index = rng.integers(0, 10, size=(32, 3)).astype(np.uint16)

    @nki.jit
    def k(s, i):
        out = nl.ndarray((32, 3, 16, 2), s.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.local_gather(nl.load(s), nl.load(i), 2))
        return out

    hw_index = index * 2  # element offsets, as the SDK example passes them
    out = simulate_kernel(k, src, hw_index)
    ref = np.empty((32, 48, 2), np.float32)
    for g in range(2):
        rows = slice(16 * g, 16 * (g + 1))
        ref[rows] = np.take(src[rows], index[rows].flatten(order="F"), axis=1)
    _finite_nonzero(out)
    np.testing.assert_array_equal(out, ref.reshape(32, 3, 16, 2))


# ---------------------------------------------------------------------------------------
# random numbers
# ---------------------------------------------------------------------------------------


def test_rand_is_uniform_01_and_reproducible_with_random_seed():
    @nki.jit
    def k():
        out = nl.ndarray((2, 64, 32), nl.float32, buffer=nl.shared_hbm)
        nl.random_seed(7)
        nl.store(out[0], nl.rand((64, 32)))
        nl.random_seed(7)
        nl.store(out[1], nl.rand((64, 32)))
        return out

    out = simulate_kernel(k)
    assert out.shape == (2, 64, 32) and np.all(out >= 0) and np.all(out < 1)
    assert 0.4 < out.mean() < 0.6 and out.std() > 0.2
    np.testing.assert_array_equal(out[0], out[1])
    with pytest.raises(TypeError, match="E009"):
        simulate_kernel(nki.jit(lambda: nl.rand((4, 4), dtype=nl.int32)))


def test_dropout_returns_data_unchanged_and_warns(rng):
    a = rng.standard_normal((16, 8)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.dropout(nl.load(x), prob=0.5))
        return out

    with pytest.warns(SimWarning, match="not simulated"):
        out = simulate_kernel(k, a)
    np.testing.assert_array_equal(out, a)

    @nki.jit
    def bad(x):
        return nisa.dropout(nl.load(x), prob=nl.zeros((8, 1), nl.float32))

    with pytest.raises(ValueError, match="E011.*prob"):
        simulate_kernel(bad, a)


# ---------------------------------------------------------------------------------------
# selection / search
# ---------------------------------------------------------------------------------------


def test_tensor_copy_predicated_keeps_dst_where_false(rng):
    a = rng.standard_normal((8, 12)).astype(np.float32)
    b = rng.standard_normal((8, 12)).astype(np.float32)
    pred = (a > 0).astype(np.uint8)

    @nki.jit
    def k(src, dst0, p):
        out = nl.ndarray(src.shape, src.dtype, buffer=nl.shared_hbm)
        d = nl.load(dst0)
        nisa.tensor_copy_predicated(src=nl.load(src), dst=d, predicate=nl.load(p), reverse_pred=True)
        nl.store(out, d)
        return out

    out = simulate_kernel(k, a, b, pred)
    np.testing.assert_array_equal(out, np.where(pred == 0, a, b))


def test_select_reduce_with_max_reduction(rng):
    a = rng.standard_normal((8, 20)).astype(np.float32)
    pred = rng.integers(0, 2, size=(8, 20)).astype(np.uint8)

    @nki.jit
    def k(x, p):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((8, 1), x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((8, 20), nl.float32)
        r = nl.ndarray((8, 1), nl.float32)
        nisa.select_reduce(
            dst=d,
            predicate=nl.load(p),
            on_true=nl.load(x),
            on_false=-5.0,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=r,
            reduce_op=np.max,
        )
        nl.store(out, d)
        nl.store(red, r)
        return out, red

    out, red = simulate_kernel(k, a, pred)
    ref = np.where(pred != 0, a, -5.0)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(red, ref.max(axis=1, keepdims=True))


def test_range_select_and_accumulator_chaining(rng):
    a = rng.random((4, 10)).astype(np.float32)
    lo = np.full((4, 1), 3, np.float32)
    hi = np.array([[5], [8], [12], [30]], np.float32)

    @nki.jit
    def k(x, b0, b1):
        out = nl.ndarray((2, 4, 10), nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((4, 1), nl.float32, buffer=nl.shared_hbm)
        t, l_, h_ = nl.load(x), nl.load(b0), nl.load(b1)
        r = nl.ndarray((4, 1), nl.float32)
        s0 = nisa.range_select(
            on_true_tile=t,
            comp_op0=np.greater_equal,
            comp_op1=np.less,
            bound0=l_,
            bound1=h_,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            range_start=0,
        )
        s1 = nisa.range_select(
            on_true_tile=nl.add(t, 1.0),
            comp_op0=np.greater_equal,
            comp_op1=np.less,
            bound0=l_,
            bound1=h_,
            reduce_cmd=nisa.reduce_cmd.reduce,
            reduce_res=r,
            range_start=10,
        )
        nl.store(out[0], s0)
        nl.store(out[1], s1)
        nl.store(red, r)
        return out, red

    out, red = simulate_kernel(k, a, lo, hi)
    fill = np.finfo(np.float32).min
    i0, i1 = np.arange(10)[None], 10 + np.arange(10)[None]
    r0 = np.where((i0 >= lo) & (i0 < hi), a, fill)
    r1 = np.where((i1 >= lo) & (i1 < hi), a + 1, fill)
    np.testing.assert_array_equal(out[0], r0)
    np.testing.assert_array_equal(out[1], r1)
    np.testing.assert_array_equal(red, np.maximum(r0.max(1), r1.max(1))[:, None])


def test_nc_find_index8_and_match_replace8(rng):
    a = rng.permutation(4 * 30).reshape(4, 30).astype(np.float32)

    @nki.jit
    def k(x):
        idx_out = nl.ndarray((4, 8), nl.uint32, buffer=nl.shared_hbm)
        rep_out = nl.ndarray((4, 30), nl.float32, buffer=nl.shared_hbm)
        di_out = nl.ndarray((4, 8), nl.uint32, buffer=nl.shared_hbm)
        t = nl.load(x)
        top = nisa.max8(src=t)
        nl.store(idx_out, nisa.nc_find_index8(data=t, vals=top))
        di = nl.ndarray((4, 8), nl.uint32)
        nl.store(rep_out, nisa.nc_match_replace8(data=t, vals=top, imm=-1.0, dst_idx=di))
        nl.store(di_out, di)
        return idx_out, rep_out, di_out

    idx, rep, di = simulate_kernel(k, a)
    order = np.argsort(-a, axis=1)[:, :8]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(di, order)
    ref = a.copy()
    np.put_along_axis(ref, order, -1.0, axis=1)
    np.testing.assert_array_equal(rep, ref)


def test_tensor_scalar_cumulative_reset_and_load_reduce(rng):
    x = rng.standard_normal((6, 9)).astype(np.float32)
    init = rng.standard_normal((6, 1)).astype(np.float32)

    @nki.jit
    def k(a, i):
        out = nl.ndarray((3, 6, 9), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        d = nl.ndarray((6, 9), nl.float32)
        nisa.tensor_scalar_cumulative(dst=d, src=t, op0=nl.multiply, op1=nl.add, imm0=2.0)
        nl.store(out[0], d)
        nisa.tensor_scalar_cumulative(
            dst=d, src=t, op0=nl.add, op1=nl.max, imm0=0.0, imm1=nl.load(i), reduce_cmd=nisa.reduce_cmd.load_reduce
        )
        nl.store(out[1], d)
        nisa.tensor_scalar_cumulative(dst=d, src=t, op0=nl.add, op1=nl.max, imm0=0.0, reduce_cmd=nisa.reduce_cmd.reduce)
        nl.store(out[2], d)
        return out

    out = simulate_kernel(k, x, init)
    np.testing.assert_allclose(out[0], np.cumsum(2 * x, axis=1), rtol=1e-6, atol=1e-6)
    m1 = np.maximum.accumulate(np.concatenate([init, x], axis=1), axis=1)[:, 1:]
    np.testing.assert_array_equal(out[1], m1)
    np.testing.assert_array_equal(out[2], np.maximum(m1[:, -1:], np.maximum.accumulate(x, axis=1)))


def test_sequence_bounds_matches_a_numpy_reference():
    ids = np.array([[0, 3, 3, 5, 5, 5, 0, 2, 2, 4]], np.float32)

    @nki.jit
    def k(s):
        out = nl.ndarray((1, 2, 10), s.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.sequence_bounds(segment_ids=nl.load(s)))
        return out

    out = simulate_kernel(k, ids)
    n = 10
    start = [n, 1, 1, 3, 3, 3, n, 7, 7, 9]
    end = [-1, 3, 3, 6, 6, 6, -1, 9, 9, 10]
    np.testing.assert_array_equal(out, np.array([[start, end]], np.float32))


def test_nc_stream_shuffle_within_quadrants_and_255_keeps(rng):
    a = rng.standard_normal((64, 6)).astype(np.float32)
    mask = [(i + 5) % 32 for i in range(32)]
    mask[3] = 255

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        d = nl.full((64, 6), 9.0, nl.float32)
        nisa.nc_stream_shuffle(src=nl.load(x), dst=d, shuffle_mask=mask)
        nl.store(out, d)
        return out

    out = simulate_kernel(k, a)
    ref = np.empty_like(a)
    for i in range(64):
        ref[i] = 9.0 if mask[i % 32] == 255 else a[(i // 32) * 32 + mask[i % 32]]
    np.testing.assert_array_equal(out, ref)


def test_tensor_partition_reduce(rng):
    a = rng.standard_normal((32, 4, 3)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((2, 1, 4, 3), x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out[0], nisa.tensor_partition_reduce(np.add, t))
        nl.store(out[1], nisa.tensor_partition_reduce(np.max, t))
        return out

    out = simulate_kernel(k, a)
    np.testing.assert_allclose(out[0], a.sum(0, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(out[1], a.max(0, keepdims=True))


def test_loop_reduce_reduces_into_the_assigned_tile(rng):
    a = rng.standard_normal((4, 8, 5)).astype(np.float32)

    @nki.jit
    def k(x):
        out = nl.ndarray((8, 5), x.dtype, buffer=nl.shared_hbm)
        b = nl.full((8, 5), -100.0, nl.float32)
        for i in nl.sequential_range(4):
            b = nl.loop_reduce(nl.load(x[i]), op=np.maximum, loop_indices=[i])
        nl.store(out, b)
        return out

    out = simulate_kernel(k, a)
    np.testing.assert_array_equal(out, a.max(axis=0))

    @nki.jit
    def unassigned(x):
        return nl.store(
            nl.ndarray((8, 5), x.dtype, buffer=nl.shared_hbm),
            nl.loop_reduce(nl.load(x[0]), op=np.add, loop_indices=[0]),
        )

    with pytest.raises(ValueError, match="must be assigned"):
        simulate_kernel(unassigned, a)


# ---------------------------------------------------------------------------------------
# TensorE double-row, compiler allocation, small namespace items
# ---------------------------------------------------------------------------------------


def test_nc_matmul_double_row_perf_mode(rng):
    f8 = ml_dtypes.float8_e5m2
    s = rng.integers(-3, 4, size=(16, 2, 8)).astype(f8)
    m = rng.integers(-3, 4, size=(16, 2, 24)).astype(f8)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((8, 24), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3"))
        return out

    out, tr = trace_kernel(k, s, m)
    ref = np.einsum("kli,klj->ij", s.astype(np.float32), m.astype(np.float32))
    _finite_nonzero(out)
    np.testing.assert_array_equal(out, ref)
    assert [e.payload.perf_mode for e in tr.events if e.op == "nc_matmul"] == ["double_row"]
    with pytest.raises(TypeError, match="E009.*fp8"):
        simulate_kernel(k, s.astype(np.float32), m.astype(np.float32))


def test_compiler_sbuf_and_psum_alloc_accept_an_allocation_function(rng):
    import nki_kernels.sim.nki01.compiler as ncc

    a = rng.standard_normal((8, 8)).astype(np.float32)

    def alloc_fn(idx, pdim_size, fdim_size):  # sbuf: (start_partition, byte_addr)
        return (0, 0)

    def alloc_at(addr):
        return lambda idx, pdim_size, fdim_size: (0, addr)

    def psum_fn(idx, pdim_size, fdim_size):  # psum: (bank, start_partition, byte_addr)
        return (0, 0, 0)

    # an allocated kernel places every tensor itself and transposes on VectorE (nki.errors.rst
    # err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel; nki_direct_allocation_guide.rst)
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 8), nl.float32, buffer=ncc.sbuf.alloc(alloc_fn))
        t[...] = nl.load(x)
        p = nl.ndarray((8, 8), nl.float32, buffer=ncc.psum.alloc(psum_fn))
        p[...] = nisa.nc_transpose(t, engine=nisa.vector_engine)
        r = nl.ndarray((8, 8), nl.float32, buffer=ncc.sbuf.alloc(alloc_at(64)))
        r[...] = nl.copy(p)
        nl.store(out, r)
        return out

    np.testing.assert_array_equal(simulate_kernel(k, a), a.T)
    with pytest.raises(TypeError, match="allocation function"):
        ncc.sbuf.alloc(42)


def test_nki_tensor_finfo_language_constants_and_logging_off():
    fi = nl.finfo(nl.bfloat16)
    assert fi.max == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max) and fi.bits == 16
    with pytest.raises(ValueError, match="E018.*float dtype"):
        nl.finfo(nl.int32)
    had_off = hasattr(logging, "OFF")
    with install_neuronxcc_alias():
        import neuronxcc.nki as real_looking_nki
        import neuronxcc.nki.language.constants as constants
        from neuronxcc.nki.language.constants import sizeinbytes

        assert sizeinbytes(nl.bfloat16) == 2 and sizeinbytes(np.float32) == 4 and constants.sbuf_min_align >= 1
        assert real_looking_nki.tensor is nki.tensor
        logging.disable(logging.OFF)  # what both CS149 harnesses do
        assert logging.root.manager.disable >= logging.CRITICAL
        logging.disable(logging.NOTSET)
    assert hasattr(logging, "OFF") == had_off  # the alias is reversible


def test_nki_tensor_is_the_tile_class():
    @nki.jit
    def k(x):
        t = nl.load(x)
        assert isinstance(t, nki.tensor)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    a = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(simulate_kernel(k, a), a)


def test_tensor_copy_dynamic_src_gathers_columns_at_runtime_offsets(rng):
    """SDK 2.26 isa tensor_copy_dynamic_src: an on-chip copy from a free-axis offset read from a tile at
    run time (one call per offset); a plain copy through the same view is E014."""
    data = rng.standard_normal((128, 96)).astype(np.float32)
    offs = np.array([[7, 3, 50, 0, 95, 12]], np.int32)

    @nki.jit
    def k(d, o):
        out = nl.ndarray((128, 6), nl.float32, buffer=nl.shared_hbm)
        src = nl.load(d)
        off = nl.load(o)
        res = nl.ndarray((128, 6), nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:128, 0:1]
        for j in nl.affine_range(6):
            res[i_p, j + i_f] = nisa.tensor_copy_dynamic_src(src[i_p, off[0, j] + i_f])
        nl.store(out, res)
        return out

    np.testing.assert_array_equal(simulate_kernel(k, data, offs), data[:, offs[0]])

    @nki.jit
    def plain(d, o):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        src = nl.load(d)
        off = nl.load(o)
        res = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:128, 0:1]
        res[i_p, i_f] = src[i_p, off[0, 0] + i_f]
        nl.store(out, res)
        return out

    with pytest.raises(ValueError, match=r"\[E014\].*tensor_copy_dynamic_src"):
        simulate_kernel(plain, data, offs)

    @nki.jit
    def scatter(d, o):  # tensor_copy_dynamic_dst: the destination offset at run time
        out = nl.ndarray((128, 96), nl.float32, buffer=nl.shared_hbm)
        src = nl.load(d)
        off = nl.load(o)
        res = nl.zeros((128, 96), nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:128, 0:1]
        for j in nl.affine_range(6):
            nisa.tensor_copy_dynamic_dst(dst=res[i_p, off[0, j] + i_f], src=src[i_p, j + i_f])
        nl.store(out, res)
        return out

    want = np.zeros((128, 96), np.float32)
    want[:, offs[0]] = data[:, :6]
    np.testing.assert_array_equal(simulate_kernel(scatter, data, offs), want)
