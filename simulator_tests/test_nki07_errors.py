"""NKI 0.7 front end: negative tests, one per rule class of docs/nki-0.7-spec.md, each with its code."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import SimOptions, SimWarning
from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki

RNG = np.random.default_rng(3)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def run_kernel(body):
    """``body(*tensors)`` as a kernel that returns a trivially written output."""

    @nki.jit
    def k(*a):
        body(*a)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a[0][0:1, 0:1])
        return out

    return k


def run(body, *args):
    """Run ``body(*tensors)`` as a kernel that returns a trivially written output."""
    return run_kernel(body)(*(args or (rand(128, 64),)))


def raises(exc, code, body, *args):
    with pytest.raises(exc, match=rf"\[{code}\]"):
        run(body, *args)


# ---- kernels / outputs (K) -------------------------------------------------------------------------------
def test_hbm_output_rejected():
    """K6: outputs in nl.hbm fail to compile since NKI 0.3 -> E007."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    with pytest.raises(TypeError, match=r"\[E007\].*shared_hbm"):
        k(rand(4, 4))


def test_list_argument_and_platform_target_rejected():
    """K7 list kernel arguments (E010); K1 platform_target= (E010)."""
    with pytest.raises(TypeError, match=r"\[E010\]"):
        nki.simulate(lambda a: a)([1, 2])
    with pytest.raises(TypeError, match=r"\[E010\]"):
        nki.jit(platform_target="trn2")


def test_output_never_written():
    """A returned output that nothing wrote: E016 (garbage on hardware)."""

    @nki.jit
    def k(a):
        return nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)

    with pytest.raises(ValueError, match=r"\[E016\]"):
        k(rand(4, 4))


def test_bad_lnc():
    with pytest.raises(ValueError, match=r"\[E011\]"):
        nki.jit(lambda a: a)[0]


# ---- tensors (T) -------------------------------------------------------------------------------------------
def test_string_buffer_rejected():
    """T2: string buffer names -> E007."""
    raises(TypeError, "E007", lambda a: nl.ndarray((4, 4), nl.float32, buffer="sbuf"))


def test_partition_limit():
    """T4: partition dimension > 128 -> E001."""
    raises(ValueError, "E001", lambda a: nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf))


def test_integer_enum_rejected():
    """T6: an enum argument must name a member -> E021 (an int naming one is accepted: nki-library)."""

    def body(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=7)

    raises(ValueError, "E021", body)

    def body2(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=3)  # dge_mode.none, as nki-library writes it
        nisa.tensor_copy(dst=t, src=t, engine="vector")

    raises(ValueError, "E021", body2)


def test_dma_transpose_with_dge_mode_none_warns_and_is_strict_e020():
    """The NKI 0.6 isa docstring lists unknown/hwdge/swdge as dma_transpose's only modes; AWS's nki-library passes
    none (3).  Lenient ``nki07.dma_transpose_dge_none``: a warning and the transpose by default, E020 under strict;
    the fix (dge_mode unset) is silent."""

    def kernel(mode):
        kw = {} if mode is None else {"dge_mode": mode}

        @nki.jit
        def k(a):
            t = nl.ndarray((64, 32), nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a, **kw)
            out = nl.ndarray((64, 32), nl.bfloat16, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=t)
            return out

        return k

    a = rand(32, 64, dtype=ml_dtypes.bfloat16)
    want = a.astype(np.float64).T
    with pytest.warns(SimWarning, match="nki07.dma_transpose_dge_none"):
        out = np.asarray(kernel(3)(a), dtype=np.float64)
    assert np.isfinite(out).all() and out.any()
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match=r"\[E020\]"):
        nki.simulate(kernel(3), options=SimOptions(strict=True))(a)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        out = nki.simulate(kernel(None), options=SimOptions(strict=True))(a)
    np.testing.assert_array_equal(np.asarray(out, dtype=np.float64), want)


def test_a_psum_tensor_over_one_bank_warns_and_is_strict_e004():
    """Lenient ``nki07.psum_multi_bank``: the 0.7 docs require only bank-aligned PSUM starts; nki-library's top-k
    matmuls into 512-wide slices of a (128, 1024) fp32 PSUM tensor.  Warning and correct result by default, E004
    under strict; the twin (one bank per tensor) is silent."""

    def kernel(cols):
        @nki.jit
        def k(a, b):
            sa = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=sa, src=a)
            sb = nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=sb, src=b)
            out = nl.ndarray((128, 1024), nl.float32, buffer=nl.shared_hbm)
            for j in nl.static_range(1024 // cols):
                p = nl.ndarray((128, cols), nl.float32, buffer=nl.psum)
                for i in nl.static_range(cols // 512):
                    sl = slice(i * 512, (i + 1) * 512)
                    nisa.nc_matmul(dst=p[:, sl], stationary=sa, moving=sb[:, j * cols + i * 512 :][:, 0:512])
                r = nl.ndarray((128, cols), nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=r, src=p)
                nisa.dma_copy(dst=out[:, j * cols : (j + 1) * cols], src=r)
            return out

        return k

    a, b = rand(128, 128), rand(128, 1024)
    want = a.astype(np.float64).T @ b
    with pytest.warns(SimWarning, match="nki07.psum_multi_bank"):
        out = np.asarray(kernel(1024)(a, b), dtype=np.float64)
    assert np.isfinite(out).all() and out.any()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match=r"\[E004\]"):
        nki.simulate(kernel(1024), options=SimOptions(strict=True))(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        out = nki.simulate(kernel(512), options=SimOptions(strict=True))(a, b)
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), want, rtol=1e-4, atol=1e-3)


def test_a_stationary_with_two_free_axes_warns_and_is_strict_e003():
    """Lenient ``isa.matmul_stationary_rank``: the isa docs draw [K, M] but state no rank rule; nki-library's MoE CTE
    passes a (128, 1, 128) stationary view.  Its free axes are M; E003 under strict; the 2-D twin is silent."""

    def kernel(three_d):
        @nki.jit
        def k(a, b):
            sa = nl.ndarray((128, 1, 64), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=sa, src=a)
            sb = nl.ndarray((128, 32), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=sb, src=b)
            p = nl.ndarray((64, 32), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p, stationary=sa if three_d else sa.reshape((128, 64)), moving=sb)
            r = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=p)
            out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=r)
            return out

        return k

    a, b = rand(128, 1, 64), rand(128, 32)
    want = a.reshape(128, 64).astype(np.float64).T @ b
    with pytest.warns(SimWarning, match="isa.matmul_stationary_rank"):
        out = np.asarray(kernel(True)(a, b), dtype=np.float64)
    assert np.isfinite(out).all() and out.any()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"\[E003\]"):
        nki.simulate(kernel(True), options=SimOptions(strict=True))(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        out = nki.simulate(kernel(False), options=SimOptions(strict=True))(a, b)
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), want, rtol=1e-4, atol=1e-4)


def test_unknown_dtype_packed_x4():
    """Packed x4 dtypes are not modelled -> E018."""
    raises(ValueError, "E018", lambda a: nl.ndarray((4, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf))


# ---- indexing / views (V) ----------------------------------------------------------------------------------
def test_out_of_bounds_slice_not_clamped():
    """V1: no clamping -> E008."""
    raises(IndexError, "E008", lambda a: a[0:200, :])


def test_ap_out_of_range():
    """V4: an access pattern reaching past the storage -> E008 where an instruction uses it (a view written but
    never used is no error: nki-library builds the view of a PSUM-bank tail before deciding not to use it)."""

    def copy_of(view):
        def body(a):
            t = nl.ndarray((128, 65), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=view(a))

        return body

    raises(IndexError, "E008", copy_of(lambda a: a.ap(pattern=[[64, 128], [1, 65]])))
    run(lambda a: a.ap(pattern=[[64, 128], [1, 65]]))  # written, never used

    def on_chip(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray((128, 65), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t.ap(pattern=[[64, 128], [1, 65]]))

    raises(IndexError, "E008", on_chip)


def test_onchip_reshape_and_permute_keep_partition():
    """V3: on chip, reshape keeps shape[0]; permute keeps dims[0] == 0 -> E026."""

    def body(a):
        t = nl.load(a)
        t.reshape((64, 128))

    raises(ValueError, "E026", body)

    def body2(a):
        nl.load(a).permute((1, 0))

    raises(ValueError, "E026", body2)

    def body3(a):
        nl.load(a).permute((0, 1)).reshape((128, 64))  # fine: contiguous
        nl.load(a)[:, 0:64:2].reshape((128, 2, 16))  # strided but splittable
        nl.load(a).permute((0, 1))[:, ::2].permute((0, 1)).reshape((128, 32))
        nl.load(a.reshape((128, 8, 8))).permute((0, 2, 1)).reshape((128, 64))

    raises(NotImplementedError, "E022", body3)


def test_reshape_element_count():
    """V3 (NKI 0.5): reshape validates the element count -> E011."""
    raises(ValueError, "E011", lambda a: a.reshape((128, 63)))


def test_broadcast_needs_size_one():
    raises(ValueError, "E011", lambda a: nl.load(a).broadcast(1, 4))


# ---- ISA (I) ------------------------------------------------------------------------------------------------
def test_dst_first_required():
    """I1: passing a non-tensor as dst (the 0.1 call form) -> E010."""
    raises(TypeError, "E010", lambda a: nisa.memset((128, 64), 0.0, nl.float32))  # the 0.1 form


def test_matmul_destination_rules():
    """I2: dst must be PSUM (E007) and fp32 on trn2 (E009); moving free <= 512 (E003)."""

    def sbuf_dst(a):
        t = nl.load(a)
        d = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(d, t, t)

    raises(TypeError, "E007", sbuf_dst)

    def bf16_dst(a):
        t = nl.load(a)
        d = nl.ndarray((64, 64), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(d, t, t)

    raises(TypeError, "E009", bf16_dst)

    def wide(a, b):
        d = nl.ndarray((64, 1024), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(d, nl.load(a), nl.load(b))

    # the (64, 1024) fp32 PSUM tensor spans two banks (lenient nki07.psum_multi_bank); the matmul is E003
    with pytest.warns(SimWarning, match="psum_multi_bank"), pytest.raises(ValueError, match=r"\[E003\]"):
        run(wide, rand(128, 64), rand(128, 1024))


def test_matmul_dst_shape_mismatch():
    """I8: dst must match the result's partitions and free size -> E011."""

    def body(a):
        t = nl.load(a)
        d = nl.ndarray((64, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(d, t, t)

    raises(ValueError, "E011", body)


def test_matmul_reads_sbuf_only():
    """I13: nc_matmul operands in PSUM -> E007."""

    def body(a):
        t = nl.load(a)
        p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=t)
        d = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(d, p, t)

    raises(TypeError, "E007", body)


def test_dma_never_touches_psum():
    """I5: dma_copy from PSUM -> E007."""

    def body(a):
        p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(a))
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=out, src=p)

    raises(TypeError, "E007", body)


def test_dma_hwdge_dtype_and_removed_rmw():
    """I5: hwdge needs matching dtypes (E009); dst_rmw_op was removed (E021); counts differ (E011)."""

    def body(a):
        t = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=nisa.dge_mode.hwdge)

    raises(TypeError, "E009", body)

    def body2(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dst_rmw_op=nl.add)

    raises(ValueError, "E021", body2)

    def body3(a):
        t = nl.ndarray((128, 32), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)

    raises(ValueError, "E011", body3)


def test_dma_transpose_rank_rule():
    """I6: dst.shape equals the permuted src.shape exactly, including rank -> E011; bad axes E020."""

    def body(a):
        d = nl.ndarray((64, 128, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=a)

    raises(ValueError, "E011", body)

    def body2(a):
        d = nl.ndarray((64, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=a, axes=(0, 1))

    raises(ValueError, "E020", body2)


def test_nc_transpose_limits_and_dtype():
    """I7: VectorE transpose <= 32x32 (E020); dst dtype == data dtype (E009)."""

    def body(a):
        d = nl.ndarray((64, 128), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(dst=d, data=nl.load(a), engine=nisa.engine.vector)

    raises(ValueError, "E020", body)

    def body2(a):
        d = nl.ndarray((64, 128), nl.bfloat16, buffer=nl.psum)
        nisa.nc_transpose(dst=d, data=nl.load(a))

    raises(TypeError, "E009", body2)


def test_tensor_reduce_trailing_axes():
    """I9: reduction axes must be the trailing free axes; never the partition axis -> E023."""

    def body(a):
        t = nl.load(a.reshape((128, 8, 8)))
        d = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=d, op=nl.add, data=t, axis=1)

    raises(ValueError, "E023", body)

    def body2(a):
        t = nl.load(a)
        d = nl.ndarray((1, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=d, op=nl.add, data=t, axis=0)

    raises(ValueError, "E023", body2)


def test_memset_value_must_match_dtype():
    """I10: a non-integer float into an int tile -> E009 (an integral float warns)."""

    def body(a):
        t = nl.ndarray((4, 4), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=2.5)

    raises(TypeError, "E009", body)

    def body2(a):
        t = nl.ndarray((4, 4), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=2.0)

    with pytest.warns(SimWarning, match="int literal"):
        run(body2)


def test_iota_affine_select_pattern_count_and_buffer():
    """I11/I12: pattern element count must equal the free size (E011); dst in SBUF (E007)."""

    def body(a):
        t = nl.ndarray((8, 6), nl.int32, buffer=nl.sbuf)
        nisa.iota(t, [[1, 5]])

    raises(ValueError, "E011", body)

    def body2(a):
        t = nl.ndarray((8, 6), nl.float32, buffer=nl.psum)
        nisa.iota(t, [[1, 6]])

    raises(TypeError, "E007", body2)


def test_gpsimd_cannot_access_psum():
    """I13: GpSimd engine on a PSUM operand -> E007."""

    def body(a):
        p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(a))
        d = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=p, engine=nisa.engine.gpsimd)

    raises(TypeError, "E007", body)


def test_unknown_keyword_and_mismatched_dtype_kwarg():
    """ISA calls reject unknown keywords (E010, e.g. the removed mask=) and a dtype= != dst.dtype (E009)."""

    def body(a):
        t = nl.load(a)
        nisa.tensor_copy(dst=t, src=t, mask=None)

    raises(TypeError, "E010", body)

    def body2(a):
        t = nl.load(a)
        d = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=t, dtype=nl.bfloat16)

    raises(TypeError, "E009", body2)


def test_uninitialised_read_poisons_output():
    """T1: a read of uninitialised SBUF reaches the output as NaN (caught by the oracle check)."""

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=t, data2=nl.load(a), op=nl.add)
        nl.store(out, t)
        return out

    with pytest.warns(SimWarning, match="never-written"):
        out = k(rand(8, 8))
    assert np.isnan(out).all()


# ---- language / loops (L, C) ----------------------------------------------------------------------------------
def test_reduce_partition_axis_language():
    """L6: nl.sum over the partition axis -> E023."""
    raises(ValueError, "E023", lambda a: nl.sum(nl.load(a), axis=0))


def test_fori_loop_rules():
    """C2: step must be a positive int (E011); the body cannot return a value (E011)."""
    raises(ValueError, "E011", lambda a: nl.fori_loop(0, 4, lambda i: None, step=0))
    raises(ValueError, "E011", lambda a: nl.fori_loop(0, 4, lambda i: 1))


def test_dynamic_range_removed_in_07_and_kept_by_the_custom_frontend(monkeypatch):
    """C4: NKI 0.7 removed nl.dynamic_range (MIG 0.6 -> 0.7): E015 naming fori_loop.  K9:
    NKI_COMPILER_FRONTEND=custom keeps the 0.6 specialization, where it runs with the 0.6 deprecation warning."""
    trips = []

    def body(a):
        for i in nl.dynamic_range(3):
            trips.append(i.value)

    monkeypatch.delenv("NKI_COMPILER_FRONTEND", raising=False)
    with pytest.raises(ValueError, match=r"\[E015\].*fori_loop"):
        run(body)
    assert trips == []
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="deprecated"):
        run(body)
    assert trips == [0, 1, 2]


def test_unimplemented_api_is_coded():
    """Anything not implemented raises E100, never AttributeError."""
    raises(NotImplementedError, "E100", lambda a: nisa.nc_matmul_mx(a, a, a))
    raises(NotImplementedError, "E100", lambda a: nl.gather_flattened(a, a))


def test_api_outside_kernel():
    """E019: NKI calls outside a kernel."""
    with pytest.raises(RuntimeError, match=r"\[E019\]"):
        nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)


# ---- calling convention ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda t: nisa.tensor_copy(src=t),
        lambda t: nisa.nc_matmul(stationary=t, moving=t),
        lambda t: nisa.activation(op=nl.exp, data=t),
        lambda t: nisa.dma_copy(src=t),
    ],
)
def test_an_isa_call_without_dst_is_a_coded_one_line_error(call):
    """I1: every ISA call takes dst first.  Without it the error names the call and the fix, at the
    user's line (it used to be a bare TypeError inside the interpreter)."""

    @nki.jit
    def k(a):
        t = nl.load(a)
        call(t)
        return a

    with pytest.raises(
        TypeError,
        match=r"\[E010\] \w+\(dst\): nisa\.\w+\(\) was called without dst.*"
        r"nisa\.\w+\(dst=tile, \.\.\.\).* at test_nki07_errors\.py:\d+$",
    ) as e:
        k(np.ones((8, 8), np.float32))
    assert "\n" not in str(e.value)
    assert e.traceback[-1].path.name == "test_nki07_errors.py"


def test_an_isa_call_missing_an_operand_names_it():
    @nki.jit
    def k(a):
        t = nl.load(a)
        nisa.tensor_tensor(t, t)  # data2 and op missing
        return a

    with pytest.raises(
        TypeError,
        match=r"\[E010\] tensor_tensor\(data2\): nisa\.tensor_tensor\(\) is missing "
        r"argument\(s\) \['data2', 'op'\]",
    ):
        k(np.ones((8, 8), np.float32))


def test_a_kernel_that_writes_an_input_argument_fills_the_callers_array_in_place():
    """K8: "Input arrays are updated in-place if the kernel modified the corresponding HBM tensors"
    (aws-neuron-sdk 81ce03ae nki/guides/nki_simulator.rst, "Execution"); arguments it did not write
    are left alone."""

    @nki.jit
    def k(a, out, untouched):
        t = nl.load(a)
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(r, t, nl.multiply, 3.0)
        nisa.dma_copy(dst=out, src=r)
        return out

    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros((8, 8), np.float32)
    untouched = np.full((8, 8), 7.0, np.float32)
    ret = nki.simulate(k)(a, out, untouched)
    np.testing.assert_array_equal(out, 3 * a)  # filled in place
    np.testing.assert_array_equal(ret, 3 * a)  # and returned
    assert np.all(untouched == 7.0) and np.all(a == np.arange(64).reshape(8, 8))
    out[...] = 0
    k(a, out, untouched)  # calling the kernel directly simulates it too
    np.testing.assert_array_equal(out, 3 * a)


# ---- NKI 0.6/0.7 rules the 0.1 front end does not share, and 0.3+ language restrictions ----------
def test_nc_n_gather_gathers_per_partition_and_checks_its_operands():
    """NKI 0.6 isa nc_n_gather: dst[p, j] = data[p].ravel()[indices[p, j]]; indices uint32 (E009)."""
    data = rand(16, 64)
    idx = RNG.integers(0, 64, (16, 8)).astype(np.uint32)

    @nki.jit
    def k(d, i):
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        ds = nl.ndarray((16, 64), nl.float32, buffer=nl.sbuf)
        it = nl.ndarray((16, 8), i.dtype, buffer=nl.sbuf)
        g = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ds, src=d)
        nisa.dma_copy(dst=it, src=i)
        nisa.nc_n_gather(dst=g, data=ds, indices=it)
        nisa.dma_copy(dst=out, src=g)
        return out

    np.testing.assert_array_equal(k(data, idx), np.take_along_axis(data, idx.astype(np.int64), axis=1))
    with pytest.raises(TypeError, match=r"\[E009\].*uint32"):
        k(data, idx.astype(np.int32))


def test_shared_hbm_in_a_loop_is_not_a_0_7_error():
    """The 0.1 rule err_shared_hbm_must_in_kernel_level (E013) has no 0.6/0.7 counterpart."""

    @nki.jit
    def k(a):
        for _i in nl.affine_range(1):
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=a)
        return out

    x = rand(4, 4)
    np.testing.assert_array_equal(k(x), x)


def test_engine_destination_start_partition():
    """The arch guide's start partitions on destinations too (a 64-partition write at 0 or 64, not 32): the lenient
    rule arch.start_partition -- the compiler's allocator handles it, and an NxDI 0.7 kernel that ran writes a
    1-partition slice at partition 1 -- a warning by default, E026 under strict."""

    def body(start, n=64):
        def f(a):
            t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
            s = nl.ndarray((n, 64), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=a[0:n, :])
            nisa.tensor_copy(dst=t[start : start + n, :], src=s)

        return f

    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        run(body(64))
    for start, n in ((32, 64), (1, 1)):
        with pytest.warns(SimWarning, match=r"\[E026 under strict\] arch.start_partition"):
            run(body(start, n))
        with pytest.raises(ValueError, match=r"\[E026\]"):
            nki.simulate(run_kernel(body(start, n)), options=SimOptions(strict=True))(rand(128, 64))


def test_keyword_only_kernel_signature_custom_e010_tracer_warns(monkeypatch):
    """MIG 0.2->0.3 'Remove keyword-only argument separator' is a rule of the 0.3-0.6 parser: E010 at the kernel's
    def line under NKI_COMPILER_FRONTEND=custom (and under strict); NKI 0.7 traces the kernel with Python (RN
    0.7.0) and the 2.33 pages are silent on it, so by default a SimWarning."""
    from nki_kernels.sim import SimOptions

    @nki.jit
    def bad(a, *, scale=1.0):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    @nki.jit
    def good(a, scale=1.0):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    x = rand(4, 4)
    monkeypatch.delenv("NKI_COMPILER_FRONTEND", raising=False)
    with pytest.warns(SimWarning, match="keyword-only"):
        np.testing.assert_array_equal(bad(x), x)
    with pytest.raises(TypeError, match=r"\[E010\].*keyword-only"):
        nki.simulate(bad, options=SimOptions(strict=True))(x)
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="custom"), pytest.raises(TypeError, match=r"\[E010\].*keyword-only"):
        bad(x)
    np.testing.assert_array_equal(good(x), x)


def test_is_operator_in_a_kernel_warns_and_is_strict_e010():
    """MIG 0.2->0.3 'Replace is / is not with == / !=': a warning (nki-library helpers use `is None`), E010
    under strict; `==` is the fix."""

    @nki.jit
    def bad(a, flag=None):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if flag is None:
            nisa.dma_copy(dst=out, src=a)
        return out

    @nki.jit
    def good(a, flag=None):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if flag == None:  # noqa: E711 -- the form the 0.3+ compiler accepts
            nisa.dma_copy(dst=out, src=a)
        return out

    x = rand(4, 4)
    with pytest.warns(SimWarning, match="`is`"):
        bad(x)
    with pytest.raises(TypeError, match=r"\[E010\]"):
        nki.simulate(bad, options=SimOptions(strict=True))(x)
    np.testing.assert_array_equal(good(x), x)


# ---- kernel argument values (LG "NKI Values", "Class Support"; MIG 0.1 -> 0.2) -------------------------------
def _copy_kernel():
    @nki.jit
    def k(a, extra=None):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    return k


class _Plain:
    def __init__(self) -> None:
        self.tile = 128


class _Config(nl.NKIObject):
    def __init__(self) -> None:
        self.tile = 128


class _Mixin:
    pass


class _Mixed(nl.NKIObject, _Mixin):
    pass


@pytest.mark.parametrize(
    "bad, good",
    [
        ({1: 2}, {"1": 2}),  # dictionaries take only string keys
        ((4, {0.5: "x"}), (4, {"x": 0.5})),  # ... also inside a container
        (_Plain(), _Config()),  # a user class inherits from NKIObject
    ],
    ids=["dict_key", "nested_dict_key", "plain_class"],
)
def test_kernel_argument_values_the_compiler_rejects(bad, good):
    """LG "NKI Values" (dictionaries with string keys) and "Class Support" (NKIObject and no other base); MIG
    0.1 -> 0.2 "Dictionaries support only string keys": E010 naming the argument, at the kernel's def line."""
    k = _copy_kernel()
    x = rand(4, 4)
    with pytest.raises(TypeError, match=r"\[E010\] nki.jit\(extra\)"):
        k(x, bad)
    np.testing.assert_array_equal(k(x, good), x)


def test_enum_and_dataclass_arguments_are_nki_values():
    """LG "Enumerations" and "Class Support": Enum members and NKIObject data classes are kernel arguments."""
    import dataclasses
    import enum

    class Mode(enum.Enum):
        A = 1

    @dataclasses.dataclass
    class Cfg(nl.NKIObject):
        n: int = 4

    x = rand(4, 4)
    np.testing.assert_array_equal(_copy_kernel()(x, (Mode.A, Cfg(), nl.float32, None, "s", 2.5)), x)


@pytest.mark.parametrize("bad, good", [(2**40, 2**31 - 1), (1e300, 3.0e38)], ids=["int64", "float64"])
def test_argument_outside_32_bit_values_warns_and_is_strict_e010(bad, good):
    """LG "NKI Values": 32-bit ints and floats only.  What the compiler does with a wider value is not documented:
    a SimWarning naming the argument, E010 under strict."""

    k = _copy_kernel()
    x = rand(4, 4)
    with pytest.warns(SimWarning, match="`extra`"):
        k(x, bad)
    with pytest.raises(TypeError, match=r"\[E010\]"):
        nki.simulate(k, options=SimOptions(strict=True))(x, bad)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        np.testing.assert_array_equal(nki.simulate(k, options=SimOptions(strict=True))(x, good), x)


@pytest.mark.parametrize("form", ["slice_again", "select_again", "second_dynamic_select"])
def test_indirect_view_cannot_be_indexed_again(form):
    """LG "Querying layout" / deep dive nki-aps "Vector Dynamic Access": the indirected dimension of a
    vector_select view cannot be sliced or selected again, and a tensor takes one dynamic select (E014); the fix
    slices the base tensor before the dynamic select."""

    def kernel(bad):
        @nki.jit
        def k(a):
            offsets = nl.ndarray((32, 1), nl.int32, buffer=nl.sbuf)
            nisa.iota(offsets, [[1, 1]], 0, 2)  # rows 0, 2, 4, ...
            src = a.vector_select(0, offsets)  # (32, 64), indirect on dim 0
            if bad and form == "slice_again":
                src = src[0:16, :]
            elif bad and form == "select_again":
                src = src.select(0, 1)
            elif bad:
                src = src.vector_select(0, offsets)
            out = nl.ndarray(src.shape, nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=src)
            return out

        return k

    x = rand(128, 64)
    with pytest.raises(ValueError, match=r"\[E014\].*indirect"):
        kernel(True)(x)
    np.testing.assert_array_equal(kernel(False)(x), x[0:64:2])


@pytest.mark.parametrize("query", [lambda v: v.strides, lambda v: v.is_contiguous()])
def test_layout_query_of_an_indirect_view_is_coded(query):
    """The layout of a vector_select view (no strided array behind it) is not implemented: E100 for ``strides``
    and ``is_contiguous()`` alike (is_contiguous raised AttributeError on the missing array); a basic view answers."""

    def body(a):
        offsets = nl.ndarray((32, 1), nl.int32, buffer=nl.sbuf)
        nisa.iota(offsets, [[1, 1]], 0, 2)
        query(a.vector_select(0, offsets))

    raises(NotImplementedError, "E100", body)
    run(lambda a: query(a[0:64:2]))


def test_tensor_subscript_is_the_0_1_dynamic_access_syntax():
    """MIG "Dynamic access pattern": the 0.1 form `A[idx_tile, :]` became .ap(vector_offset=) / vector_select
    (E014 naming the new forms; it used to fail with an unrelated E010 from `==`)."""

    def kernel(bad):
        @nki.jit
        def k(a):
            idx = nl.ndarray((32, 1), nl.int32, buffer=nl.sbuf)
            nisa.iota(idx, [[1, 1]], 0, 2)
            out = nl.ndarray((32, 64), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=a[idx, :] if bad else a.vector_select(0, idx))
            return out

        return k

    x = rand(128, 64)
    with pytest.raises(ValueError, match=r"\[E014\].*vector_select"):
        kernel(True)(x)
    np.testing.assert_array_equal(kernel(False)(x), x[0:64:2])


def test_if_on_a_tensor_is_true_whatever_its_contents_warns_and_is_strict_e015():
    """LG "Compilation Model": if-statements are resolved at specialization time, where a tensor is an object, so
    `if t:` is true even when t holds zeros (nki-library's `if params.expert_index:` asks for presence).  A
    SimWarning naming the line, E015 under strict; an `assert` on a tensor (the docstrings' `assert
    nl.equal(...)`) still reads the contents; the fix (a Python bool) is silent."""
    import warnings

    def kernel(bad):
        def add_one(t, out):
            r = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=r, data=t, op0=nl.add, operand0=1.0)
            nisa.dma_copy(dst=out, src=r)

        @nki.jit
        def k(a):
            given = True  # the fix: a Python bool for "the tensor is there"
            t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=a)
            if bad:
                if t:
                    add_one(t, out)
            elif given:
                add_one(t, out)
            return out

        return k

    zeros = np.zeros((4, 4), np.float32)
    with pytest.warns(SimWarning, match="`if` on tensor `t`.*never its contents"):
        out = kernel(True)(zeros)
    np.testing.assert_array_equal(out, zeros + 1)  # the branch ran although t is all zeros
    with pytest.raises(ValueError, match=r"\[E015\]"):
        nki.simulate(kernel(True), options=SimOptions(strict=True))(zeros)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        out = nki.simulate(kernel(False), options=SimOptions(strict=True))(zeros)
    np.testing.assert_array_equal(out, zeros + 1)


def test_assert_on_a_tensor_reads_its_contents():
    @nki.jit
    def k(a):
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        assert t
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(k(np.ones((4, 4), np.float32)), np.ones((4, 4)))
    with pytest.raises(AssertionError):
        k(np.zeros((4, 4), np.float32))


def test_runtime_loop_rules_frozen_induction_variable_and_no_reorder():
    """MIG 0.5 -> 0.6 "Rules for migrated loops" and LG "Runtime control flow": the fori_loop variable is read-only
    (register_move / register_load into it: E015; a register of one's own is the fix), and fori_loop / while_loop
    cannot sit inside an nl.no_reorder() block (E015; the block inside the body is the fix)."""

    def write_loop_var(a):
        def body(i):
            nisa.register_move(i, 3)

        nl.fori_loop(0, 2, body)

    def write_own_register(a):
        def body(i):
            r = nisa.register_alloc()
            nisa.register_move(r, i)

        nl.fori_loop(0, 2, body)

    def loop_in_no_reorder(a):
        with nl.no_reorder():
            nl.fori_loop(0, 2, lambda i: None)

    def no_reorder_in_loop(a):
        def body(i):
            with nl.no_reorder():
                pass

        nl.fori_loop(0, 2, body)

    # NKI 0.7: with int bounds the body gets an NkiScalar, not a register (SDK 2.33.0 fori_loop): E010
    raises(TypeError, "E010", write_loop_var)
    run(write_own_register)
    raises(ValueError, "E015", loop_in_no_reorder)
    run(no_reorder_in_loop)
    run(lambda a: nl.fori_loop(0, 1, lambda i: None))  # the no_reorder depth was restored by the error
