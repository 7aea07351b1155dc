"""NKI 0.1 semantics the interpreter must accept (forms the SDK's tests and public kernels use).

Each test is a small kernel of our own exercising one rule; each fails if the rule is broken.
The rule's source is named in the interpreter where it is implemented."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import SimError, SimOptions, SimWarning, nisa, nki, nl, simulate_kernel, trace_kernel

F32 = np.float32


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


# ---- item 1: a PSUM result assigned into SBUF is a copy (an eviction in the trace) -------------


@pytest.mark.parametrize("form", ["direct_transpose", "named_transpose", "direct_matmul"])
def test_psum_result_assigned_into_sbuf_is_a_copy(form):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        sb = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        if form == "direct_transpose":
            sb[...] = nisa.nc_transpose(t)
        elif form == "named_transpose":
            r = nisa.nc_transpose(t)
            sb[...] = r
        else:
            sb[...] = nisa.nc_matmul(t, t)
        nl.store(out, sb)
        return out

    x = _x((128, 128))
    out, tr = trace_kernel(k, x)
    ref = x.T if form != "direct_matmul" else x.T @ x
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    ops = [(e.op, e.engine) for e in tr.events]
    pe = [i for i, (op, eng) in enumerate(ops) if eng == "PE"]
    assert len(pe) == 1
    ev_pe = tr.events[pe[0]]
    assert ev_pe.writes[0].buffer == "psum"  # TensorE wrote PSUM
    ev_copy = tr.events[pe[0] + 1]
    assert ev_copy.op == "tensor_copy" and ev_copy.payload.eviction is True
    assert ev_copy.reads[0].buffer == "psum" and ev_copy.writes[0].buffer == "sbuf"


# ---- item 2: instruction results are contiguous ------------------------------------------------


def test_copy_of_a_strided_view_can_be_reshaped():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)  # (128, 4, 4)
        c = nl.copy(t[:, 1:3, :])  # a strided view, copied
        nl.store(out, c.reshape((128, 8)))
        return out

    x = _x((128, 4, 4))
    np.testing.assert_array_equal(simulate_kernel(k, x), x[:, 1:3, :].reshape(128, 8))


# ---- item 3: bounds are checked at the instruction, under its mask ------------------------------


def test_masked_load_past_the_end_is_legal():
    @nki.jit
    def k(a):
        out = nl.ndarray((100, 4), nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.load(a[0:128, :], mask=(i_p < 100))  # rows 100..127 do not exist
        nl.store(out, t[0:100, :])
        return out

    x = _x((100, 4))
    np.testing.assert_array_equal(simulate_kernel(k, x), x)


def test_view_past_the_end_sub_sliced_back_in_range_is_legal():
    @nki.jit
    def k(a):
        out = nl.ndarray((64, 4), nl.float32, buffer=nl.shared_hbm)
        v = a[64:192, :]  # one past the end of a 128-row tensor ...
        t = nl.load(v[0:64, :])  # ... sub-sliced back in range
        nl.store(out, t)
        return out

    x = _x((128, 4))
    with pytest.warns(SimWarning, match="slice of a slice"):  # legal, but hardware-unproven
        out = simulate_kernel(k, x)
    np.testing.assert_array_equal(out, x[64:128])


def test_unmasked_access_past_the_end_fails_at_the_instruction():
    @nki.jit
    def k(a):
        v = a[:, 0:5]  # creating the view is fine (a is (128, 4))
        t = nl.load(v)  # reading it is not
        return a

    with pytest.raises(IndexError) as ei:
        simulate_kernel(k, _x((128, 4)))
    assert "E008" in str(ei.value) and "Out-of-bound" in str(ei.value)


# ---- item 4: the first psum += nc_matmul into a never-written PSUM tile overwrites --------------


def test_first_matmul_accumulate_into_ndarray_psum_overwrites():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        for _ in nl.affine_range(2):
            acc += nisa.nc_matmul(t, t)
        nl.store(out, nisa.tensor_copy(acc))
        return out

    x = _x((128, 128))
    out = simulate_kernel(k, x)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, 2 * (x.T @ x), rtol=1e-4, atol=1e-3)


def test_other_reads_of_never_written_memory_stay_poisoned():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nl.store(out, nl.add(t, 1.0))
        return out

    with pytest.warns(SimWarning, match="never-written"):
        out = simulate_kernel(k, _x((128, 4)))
    assert np.all(np.isnan(out))


# ---- item 6: on-chip tiles stay at least 2-D ----------------------------------------------------


def test_int_index_on_a_free_axis_keeps_a_unit_axis():
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        bias = nl.load(b)  # (128, 4)
        assert bias[:, 1].shape == (128, 1)
        r = nisa.activation(op=nl.copy, data=t, bias=bias[:, 1])
        nl.store(out, r)
        return out

    x, b = _x((128, 4)), _x((128, 4), 1)
    np.testing.assert_allclose(simulate_kernel(k, x, b), x + b[:, 1:2], rtol=1e-6)


def test_scalar_assignment_to_one_element():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        assert t[3, 2].shape == (1, 1)
        t[3, 2] = 5
        nl.store(out, t)
        return out

    x = _x((128, 4))
    ref = x.copy()
    ref[3, 2] = 5
    np.testing.assert_array_equal(simulate_kernel(k, x), ref)


# ---- item 7: reductions ---------------------------------------------------------------------


def test_negative_reduction_axis_normalises():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.sum(nl.load(a), axis=-1, keepdims=True))
        return out

    x = _x((128, 8))
    np.testing.assert_allclose(simulate_kernel(k, x), x.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_negative_axis_naming_the_partition_axis_is_still_illegal():
    @nki.jit
    def k(a):
        t = nl.sum(nl.load(a), axis=-2)
        return a

    with pytest.raises(ValueError, match="E023"):
        simulate_kernel(k, _x((128, 8)))


def test_reduction_mask_selects_inputs():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:8]
        t = nl.load(a)
        nl.store(out, nl.max(t, axis=1, keepdims=True, mask=(i_f < 4)))
        return out

    x = _x((128, 8))
    x[:, 6] = 100.0  # outside the mask: must not win
    np.testing.assert_array_equal(simulate_kernel(k, x), x[:, :4].max(axis=1, keepdims=True))


def test_isa_tensor_reduce_negative_axis():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_reduce(np.add, nl.load(a), axis=-1, keepdims=True))
        return out

    x = _x((128, 8))
    np.testing.assert_allclose(simulate_kernel(k, x), x.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-5)


# ---- item 9, 10 -------------------------------------------------------------------------------


def test_float8_e4m3_is_the_ieee_like_type():
    assert nl.float8_e4m3 == np.dtype(ml_dtypes.float8_e4m3)
    assert float(ml_dtypes.finfo(nl.float8_e4m3).max) == 240.0

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, nl.float8_e4m3, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    out = simulate_kernel(k, np.array([[300.0, 1.0]], F32))
    assert out.dtype == np.dtype(ml_dtypes.float8_e4m3)
    assert np.isinf(out.astype(F32)[0, 0]) or out.astype(F32)[0, 0] == 240.0


def test_shared_identity_matrix_lives_in_hbm():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        ident = nl.shared_identity_matrix(n=128, dtype=nl.float32)
        assert ident.buffer == "hbm"
        i = nl.load(ident)
        t = nl.load(a)
        nl.store(out, nisa.tensor_copy(nisa.nc_matmul(i, t)))
        return out

    x = _x((128, 128))
    np.testing.assert_allclose(simulate_kernel(k, x), x, rtol=1e-6)


# ---- item 12 ----------------------------------------------------------------------------------


def test_python_and_between_masks_warns_and_keeps_the_second_predicate():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:4]
        t = nl.zeros((128, 4), nl.float32)
        t[i_p, i_f] = nl.load(a[i_p, i_f], mask=(i_p < 64) and (i_f < 2))
        nl.store(out, t)
        return out

    x = _x((128, 4)) + 10
    with pytest.warns(SimWarning, match="combine predicates with &"):
        out = simulate_kernel(k, x)
    ref = np.zeros_like(x)
    ref[:, :2] = x[:, :2]
    np.testing.assert_array_equal(out, ref)


def test_hbm_tensor_truth_value_is_ambiguous():
    # SDK 2.26 nki.errors.rst err_ambiguous_tensor_truth_value: `if b:` on an optional tensor parameter is the
    # page's own example of the error (an earlier rule made HBM tensors truthy); `is not None` is the fix
    @nki.jit
    def k(a, b=None):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        if b:
            t = nl.add(t, nl.load(b))
        nl.store(out, t)
        return out

    @nki.jit
    def fixed(a, b=None):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        if b is not None:
            t = nl.add(t, nl.load(b))
        nl.store(out, t)
        return out

    x = _x((128, 4))
    with pytest.raises(SimError, match=r"\[E015\].*ambiguous"):
        simulate_kernel(k, x, x)
    np.testing.assert_allclose(simulate_kernel(k, x), x)
    np.testing.assert_allclose(simulate_kernel(fixed, x, x), 2 * x)


def test_numpy_type_objects_are_not_arrays():
    @nki.jit
    def k(a, dt):
        out = nl.ndarray(a.shape, dt, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    out = simulate_kernel(k, _x((128, 4)), np.float16)
    assert out.dtype == np.float16


def test_sbuf_tile_returned_gives_its_values_with_a_warning():
    @nki.jit
    def k(a):
        t = nl.load(a)
        return nl.add(t, 1.0)

    x = _x((128, 4))
    with pytest.warns(SimWarning, match="top-level kernel outputs must be in HBM"):
        out = simulate_kernel(k, x)
    np.testing.assert_allclose(out, x + 1, rtol=1e-6)


@pytest.mark.parametrize("op", ["max8", "bn_stats", "dma_transpose", "load_transpose2d", "softmax"])
def test_mask_is_honoured(op):
    @nki.jit
    def k(a):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        m = i_p < 64
        if op == "load_transpose2d":
            r = nl.load_transpose2d(a[0:8, 0:128], mask=m)  # result (128, 8)
        else:
            t = nl.load(a)
            if op == "max8":
                r = nisa.max8(src=t, mask=m)
            elif op == "bn_stats":
                r = nisa.bn_stats(t, mask=m)
            elif op == "dma_transpose":
                r = nisa.dma_transpose(t[0:8, 0:8], mask=(nl.arange(8)[:, None] < 4))
            else:
                r = nl.softmax(t, axis=1, mask=m)
        dst = nl.zeros(r.shape, nl.float32)
        dst[...] = r
        out = nl.ndarray(r.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, dst)
        return out

    x = _x((128, 128)) if op == "load_transpose2d" else _x((128, 8))
    out = simulate_kernel(k, x)
    rows = 4 if op == "dma_transpose" else 64
    assert np.all(out[rows:] == 0), "masked-out rows must keep the destination's zeros"
    assert np.all(np.isfinite(out[:rows])) and np.any(out[:rows] != 0)


# ---- item 14: copies never alias their source ---------------------------------------------------


@pytest.mark.parametrize(
    "how", ["nl.copy", "tensor_copy", "activation_copy", "transpose_1xN", "reshape_copy", "astype"]
)
def test_results_never_alias_their_source(how):
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 8) if how != "transpose_1xN" else (8, 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)  # (1, 8)
        if how == "nl.copy":
            c = nl.copy(t)
        elif how == "tensor_copy":
            c = nisa.tensor_copy(t)
        elif how == "activation_copy":
            c = nisa.activation(op=nl.copy, data=t)
        elif how == "transpose_1xN":
            c = nisa.nc_transpose(t, engine=nisa.vector_engine)
        elif how == "reshape_copy":
            c = nl.copy(t.reshape((1, 8)))
        else:
            c = t.astype(nl.float32)
        t[...] = nl.multiply(t, 0.0)  # a later write to the source ...
        nl.store(out, c)  # ... must not change the copy
        return out

    x = _x((1, 8)) + 3
    out = simulate_kernel(k, x)
    np.testing.assert_array_equal(out, x if how != "transpose_1xN" else x.T)


# ---- item 15: masked instructions leave the rest of the destination untouched ------------------


def test_masked_load_into_zeros_keeps_the_zeros():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:4]
        t = nl.zeros((128, 4), nl.float32)
        t[i_p, i_f] = nl.load(a[i_p, i_f], mask=(i_p < 32))
        nl.store(out, t)
        return out

    x = _x((128, 4)) + 10
    out = simulate_kernel(k, x)
    np.testing.assert_array_equal(out[:32], x[:32])
    assert np.all(out[32:] == 0)


def test_masked_compute_into_existing_tile_keeps_the_rest():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:4]
        t = nl.load(a)
        t[...] = nisa.tensor_scalar(t, np.multiply, 2.0, mask=(i_f < 2))
        nl.store(out, t)
        return out

    x = _x((128, 4))
    ref = x.copy()
    ref[:, :2] *= 2
    np.testing.assert_array_equal(simulate_kernel(k, x), ref)


@pytest.mark.parametrize("flag", [False, True])
def test_python_bool_mask_is_honoured(flag):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((128, 4), nl.float32)
        t[...] = nl.load(a, mask=flag)
        nl.store(out, t)
        return out

    x = _x((128, 4)) + 10
    out = simulate_kernel(k, x)
    np.testing.assert_array_equal(out, x if flag else np.zeros_like(x))


@pytest.mark.parametrize("flag", [False, True])
def test_python_bool_mask_of_a_result_that_lands_broadcast(flag):
    """A result computed under mask=True/False lands in a wider tile (its (P, 1) value broadcast along the free
    axis): the bool is all or nothing there too (landing it raised AttributeError: the bool was broadcast like
    a mask array)."""

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nl.zeros((128, 4), nl.float32)
        s[...] = nl.exp(t[:, 0:1], mask=flag)
        nl.store(out, s)
        return out

    x = _x((128, 4))
    ref = np.broadcast_to(np.exp(x[:, 0:1]), x.shape) if flag else np.zeros_like(x)
    np.testing.assert_allclose(simulate_kernel(k, x), ref, rtol=1e-6)


# ---- item 16: loads of 1-element / 1-D HBM tensors are 2-D tiles -------------------------------


@pytest.mark.parametrize("shape,tile", [((1,), (1, 1)), ((64,), (64, 1))])
def test_loads_of_1d_tensors_are_2d(shape, tile):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        assert t.shape == tile
        t[0, 0] = 7
        nl.store(out, t)
        return out

    x = _x(shape)
    ref = x.copy()
    ref[0] = 7
    np.testing.assert_array_equal(simulate_kernel(k, x), ref)


# ---- item 18: sbuf += matmul result / psum tile is a VectorE read-modify-write (warned) --------


@pytest.mark.parametrize("rhs", ["nl.matmul", "psum_tile"])
def test_sbuf_accumulate_of_psum_values_is_legal(rhs):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        acc = nl.zeros((128, 128), nl.float32, buffer=nl.sbuf)
        for _ in nl.affine_range(2):
            if rhs == "nl.matmul":
                acc += nl.matmul(t, t, transpose_x=True)
            else:
                p = nisa.nc_matmul(t, t)
                acc += p
        nl.store(out, acc)
        return out

    x = _x((128, 128))
    with pytest.warns(SimWarning, match="read-modify-write"):
        out = simulate_kernel(k, x)
    np.testing.assert_allclose(out, 2 * (x.T @ x), rtol=1e-4, atol=1e-3)


# ---- item 19: boolean-expression indexing -------------------------------------------------------


def test_predicate_index_restricts_the_access():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.zeros((128, 4), nl.float32)
        src = nl.load(a)
        t[i_p < 16] = nl.copy(src)
        nl.store(out, t)
        return out

    x = _x((128, 4)) + 10
    out = simulate_kernel(k, x)
    np.testing.assert_array_equal(out[:16], x[:16])
    assert np.all(out[16:] == 0)


# ---- item 8: third-party code under the alias gets the real simulator's numerics ---------------


def test_alias_defaults_to_compat_precision_and_restores():
    from nki_kernels.sim import default_options, install_neuronxcc_alias

    before = default_options().precision
    with install_neuronxcc_alias():
        import neuronxcc.nki as alias_nki
        import neuronxcc.nki.language as alias_nl

        @alias_nki.jit
        def k(a):
            out = alias_nl.ndarray(a.shape, alias_nl.bfloat16, buffer=alias_nl.shared_hbm)
            t = alias_nl.load(a, dtype=alias_nl.bfloat16)  # compat: held at fp32 ...
            alias_nl.store(out, alias_nl.multiply(t, 3.0))  # ... rounded once at the end
            return out

        assert default_options().precision == "compat"
        v = 1.0 + 2**-8 + 2**-10  # not a bf16 value
        x = np.full((1, 1), v, F32)
        got = float(simulate_kernel(k, x).astype(F32)[0, 0])
    assert default_options().precision == before == "hw"
    bf = ml_dtypes.bfloat16
    assert got == float(bf(3 * np.float32(v)))  # compat: one rounding, at the end
    hw = float(simulate_kernel(k, x).astype(F32)[0, 0])
    assert hw == float(bf(3 * float(bf(v))))  # hw: the load rounds first
    assert hw != got


# ---- item 11: nki.trace kernels take their outputs as arguments ---------------------------------


def test_trace_kernel_writes_its_output_arguments():
    @nki.trace
    def k(a, out):
        nl.store(out, nl.add(nl.load(a), 1.0))

    x = _x((128, 4))
    out = np.zeros_like(x)
    r = simulate_kernel(k, x, out)
    assert r is None
    np.testing.assert_allclose(out, x + 1, rtol=1e-6)
    np.testing.assert_array_equal(x, _x((128, 4)))  # the input is untouched


def test_jit_kernel_inputs_stay_immutable():
    @nki.jit
    def k(a):
        nl.store(a, nl.load(a))

    with pytest.raises(TypeError, match="E012"):
        simulate_kernel(k, _x((128, 4)))


# ---- items 5 and 17: capacity counts what is live at the same time -----------------------------


def test_all_eight_psum_banks_with_matmul_accumulation():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8 * 512), nl.float32, buffer=nl.shared_hbm)
        s = nl.load(a[:, 0:128])
        m = nl.load(a)
        accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]  # 8 x 2 KiB
        for acc in accs:
            acc += nisa.nc_matmul(s, m)  # the fresh result accumulates in place
        for j, acc in enumerate(accs):
            nl.store(out[:, j * 512 : (j + 1) * 512], nisa.tensor_copy(acc))
        return out

    x = _x((128, 512))
    out = simulate_kernel(k, x)
    np.testing.assert_allclose(out[:, :512], x[:, :128].T @ x, rtol=1e-4, atol=1e-3)


def test_nine_live_psum_tiles_still_overflow():
    # pm.psum_capacity is lenient (the compiler frees a tile after its last use): a warning, E005 under strict
    @nki.jit
    def k(a):
        s = nl.load(a[:, 0:128])
        m = nl.load(a)
        accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]
        accs[0] += nisa.nc_matmul(s, m)
        return a

    with pytest.raises(ValueError, match="E005"):
        simulate_kernel(k, _x((128, 512)), options=SimOptions(strict=True))
    with pytest.warns(SimWarning, match=r"\[E005 under strict\] pm.psum_capacity"):
        simulate_kernel(k, _x((128, 512)))


def _block_kernel(evict_each):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 16 * 512), nl.float32, buffer=nl.shared_hbm)
        s = nl.load(a[:, 0:128])
        m = nl.load(a)
        res = nl.ndarray((16, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)  # 16 logical banks
        for b in nl.affine_range(16):
            res[b] += nisa.nc_matmul(s, m)
            if evict_each:
                nl.store(out[:, b * 512 : (b + 1) * 512], nisa.tensor_copy(res[b]))
        if not evict_each:
            for b in nl.affine_range(16):
                nl.store(out[:, b * 512 : (b + 1) * 512], nisa.tensor_copy(res[b]))
        return out

    return k


def test_block_dimension_psum_counts_blocks_in_use():
    x = _x((128, 512))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)  # block dims are deprecated (warned)
        out = simulate_kernel(_block_kernel(True), x)
    np.testing.assert_allclose(out[:, -512:], x[:, :128].T @ x, rtol=1e-4, atol=1e-3)


def test_block_dimension_psum_with_all_blocks_live_overflows():
    # the compiler places the logical blocks of PSUM block tensors itself (AWS's attention tutorial v3 holds
    # 16 live qk blocks): a warning naming E005 by default, the error under strict
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SimWarning)
        simulate_kernel(_block_kernel(False), _x((128, 512)))
    assert any("[E005 under strict] pm.psum_capacity" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)
        with pytest.raises(ValueError, match="E005"):
            simulate_kernel(_block_kernel(False), _x((128, 512)), options=SimOptions(strict=True))


@pytest.mark.parametrize("tiles,ok", [(2, True), (9, False)])
def test_mod_alloc_counts_its_physical_tiles(tiles, ok):
    from nki_kernels.sim import compiler as ncc

    @nki.jit
    def k(a):
        s = nl.load(a[:, 0:128])
        m = nl.load(a)
        res = nl.ndarray(
            (16, nl.par_dim(128), 512), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(tiles,))
        )
        res[0] += nisa.nc_matmul(s, m)
        return a

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)
        if ok:
            simulate_kernel(k, _x((128, 512)))
        else:
            # 9 physical tiles from bank 0 need banks 0..8: PSUM has 8 (nki01/allocation.py, E030)
            with pytest.raises(ValueError, match="E030.*8 banks"):
                simulate_kernel(k, _x((128, 512)))


@pytest.mark.parametrize("op", ["bn_aggr", "rms_norm", "tensor_reduce"])
def test_mask_is_honoured_more(op):
    @nki.jit
    def k(a):
        i_p = nl.arange(128)[:, None]
        m = i_p < 64
        t = nl.load(a)
        if op == "bn_aggr":
            r = nisa.bn_aggr(nisa.bn_stats(t), mask=m)
        elif op == "rms_norm":
            r = nl.rms_norm(t, nl.load(a), axis=1, n=8, mask=m)
        else:
            r = nisa.tensor_reduce(np.add, t, axis=1, keepdims=True, mask=m)
        dst = nl.zeros(r.shape, nl.float32)
        dst[...] = r
        out = nl.ndarray(r.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, dst)
        return out

    x = _x((128, 8)) + 2
    out = simulate_kernel(k, x)
    assert np.all(out[64:] == 0), "masked-out partitions must keep the destination's zeros"
    assert np.all(np.isfinite(out[:64])) and np.any(out[:64] != 0)
    if op == "tensor_reduce":
        np.testing.assert_allclose(out[:64], x[:64].sum(axis=1, keepdims=True), rtol=1e-5)


def test_compute_on_an_index_view_past_the_end_under_a_mask_is_legal():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)  # (128, 8)
        i_p, i_f = nl.mgrid[0:128, 0:8]
        z = nl.zeros((128, 8), nl.float32)
        # columns i_f + 4 run past the tile for i_f >= 4; the mask drops exactly those
        z[i_p, i_f] = nisa.tensor_copy(t[i_p, i_f + 4], mask=(i_f < 4))
        nl.store(out, z)
        return out

    x = _x((128, 8))
    out = simulate_kernel(k, x)
    np.testing.assert_array_equal(out[:, :4], x[:, 4:])
    assert np.all(out[:, 4:] == 0)


def test_hbm_tensor_in_a_conditional_expression_is_truthy():
    # aws-neuron-sdk@81ce03ae nki/test/test_nki_isa_tensor_scalar_cumulative.py: `nl.load(imm1[...]) if imm1 else
    # None` on an optional HBM parameter (golden test); the `if` statement form is E015 (test above)
    @nki.jit
    def k(a, b=None):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.load(b) if b else None
        nl.store(out, t if u is None else nl.add(t, u))
        return out

    x = _x((128, 4))
    np.testing.assert_allclose(simulate_kernel(k, x, x), 2 * x)
    np.testing.assert_allclose(simulate_kernel(k, x), x)
