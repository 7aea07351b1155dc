"""Tensor scopes (E027), iteration races (E029) and kernel-level placement (E013): the forms real NKI 0.1 code
uses that must keep running, next to the corpus cases of simulator_tests/data/nki01_rules/ that must fail."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nki_kernels.sim import SimError, SimOptions, SimWarning, install_neuronxcc_alias, simulate_kernel

with install_neuronxcc_alias(precision=None):
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

F32 = np.float32
STRICT = SimOptions(strict=True)


def _x(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(F32)


def _clean(kernel: object, *args: object, options: SimOptions | None = None) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SimWarning)
        return simulate_kernel(kernel, *args, options=options)


def _code(kernel: object, *args: object, options: SimOptions | None = None) -> str:
    with pytest.raises(SimError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)
        simulate_kernel(kernel, *args, options=options)
    return e.value.code


# -- iteration races: what real kernels write per iteration is not a race ------------------------------------


def test_columns_of_one_sbuf_tile_per_iteration_are_not_a_race() -> None:
    # flash attention's l_buffer[:, i] pattern
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), F32, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 4), F32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            buf[:, i] = nl.max(nl.load(a[i]), axis=[1])
        nl.store(out, buf)
        return out

    x = _x(4, 128, 64)
    for opts in (None, STRICT):
        np.testing.assert_allclose(_clean(k, x, options=opts), x.max(axis=2).T)


def test_column_blocks_of_hbm_and_partition_blocks_of_sbuf_are_not_a_race() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), F32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), F32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            t[i * 32 : (i + 1) * 32, :] = nl.load(a[i * 32 : (i + 1) * 32, :])
        for j in nl.affine_range(4):
            nl.store(out[:, j * 128 : (j + 1) * 128], t[:, j * 128 : (j + 1) * 128])
        return out

    x = _x(128, 512)
    np.testing.assert_array_equal(_clean(k, x), x)


def test_interleaved_columns_are_compared_element_by_element() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), F32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out[:, i::2], nl.load(a[:, i::2]))
        return out

    x = _x(128, 8)
    np.testing.assert_array_equal(_clean(k, x), x)


def test_psum_matmul_accumulation_is_exempt_but_sbuf_accumulation_is_not() -> None:
    @nki.jit
    def psum(a):
        out = nl.ndarray((128, 128), F32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), F32, buffer=nl.psum)
        for k_ in nl.affine_range(2):
            t = nl.load(a[k_])
            acc += nisa.nc_matmul(t, t)
        nl.store(out, nl.copy(acc))
        return out

    x = _x(2, 128, 128)
    np.testing.assert_allclose(_clean(psum, x), sum(m.T @ m for m in x), rtol=1e-4, atol=1e-3)

    @nki.jit
    def sbuf(a):
        out = nl.ndarray((128, 128), F32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), F32, buffer=nl.sbuf)
        for k_ in nl.affine_range(2):
            acc[...] = nl.add(acc, nl.load(a[k_]))  # aws-neuron-sdk#1052/#1055: the documented error
        nl.store(out, acc)
        return out

    assert _code(sbuf, x) == "E029"

    @nki.jit
    def sbuf_iadd(a):
        out = nl.ndarray((128, 128), F32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), F32, buffer=nl.sbuf)
        for k_ in nl.affine_range(2):
            acc += nl.load(a[k_])  # an associative reduction (fused-mamba tutorial): warned, E029 strict
        nl.store(out, acc)
        return out

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(simulate_kernel(sbuf_iadd, x), x.sum(axis=0), rtol=1e-5)
    assert any("across parallel iterations" in str(w.message) for w in caught)
    assert _code(sbuf_iadd, x, options=STRICT) == "E029"


def test_ordered_loops_and_skip_middle_end_are_exempt() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        for i in nl.sequential_range(2):
            nl.store(out, nl.load(a[i]))
        for i in nl.static_range(2):
            nl.store(out, nl.load(a[i]))
        return out

    x = _x(2, 128, 64)
    np.testing.assert_array_equal(_clean(k, x), x[1])

    @nki.jit
    def aff(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out, nl.load(a[i]))
        return out

    assert _code(aff, x) == "E029"
    np.testing.assert_array_equal(_clean(nki.compiler.skip_middle_end_transformations(aff), x), x[1])


def test_spmd_instances_writing_the_same_hbm_elements_warn() -> None:
    """err_unexpected_output_dependencies names affine_range iterations, not SPMD instances: the lenient rule
    spmd.output_overlap (a warning naming the user's `out`, E029 under strict)."""

    @nki.jit
    def same(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[nl.program_id(0)]))
        return out

    @nki.jit
    def own(a):
        out = nl.ndarray((2, 128, 64), F32, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        nl.store(out[pid], nl.load(a[pid]))
        return out

    x = _x(2, 128, 64)
    with pytest.warns(
        SimWarning, match=r"\[E029 under strict\] spmd.output_overlap: .*SPMD instances \(0,\) and \(1,\) .*`out`"
    ):
        simulate_kernel(same[2], x)
    assert _code(same[2], x, options=STRICT) == "E029"
    np.testing.assert_array_equal(_clean(own[2], x), x)


def test_a_masked_write_races_only_on_the_elements_it_writes() -> None:
    """Iteration races compare the elements each write writes (spec corrections turn 4, item L): the unmasked
    index ranges of two iterations' last tiles overlap in the flattened storage, the masked writes do not."""

    def kernel(overlap: bool):
        @nki.jit
        def k(a):
            out = nl.ndarray((2, 200, 8), F32, buffer=nl.shared_hbm)
            flat = out.reshape((400, 8))
            src = a.reshape((400, 8))
            i_p = nl.arange(128)[:, None]
            i_f = nl.arange(8)[None, :]
            for b in nl.affine_range(2):
                for t in nl.affine_range(2):
                    rows = t * 128 + i_p
                    at = 199 if overlap else 200  # batch 1 starting one row early rewrites batch 0's last row
                    v = nl.load(src[b * 200 + rows, i_f], mask=(rows < 200))
                    nl.store(flat[b * at + rows, i_f], v, mask=(rows < 200))
            return out

        return k

    x = _x(2, 200, 8)
    np.testing.assert_array_equal(_clean(kernel(False), x), x)
    with pytest.raises(SimError, match=r"\[E029\].*iterations 0 and 1 .* `out`") as e:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SimWarning)
            simulate_kernel(kernel(True), x)
    assert "t2" not in str(e.value)  # the user's variable, not the interpreter's tensor id


# -- tensor scopes -------------------------------------------------------------------------------------------


def test_python_valued_blocks_open_no_scope() -> None:
    @nki.jit
    def k(a, flag=True):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        if flag:
            t = nl.load(a[0])
        else:
            t = nl.load(a[1])
        for _ in nl.static_range(1):
            u = nl.exp(t)
        for v in [0]:
            w = nl.add(u, float(v))
        with warnings.catch_warnings():
            s = nl.multiply(w, 1.0)
        nl.store(out, s)
        return out

    x = _x(2, 128, 64)
    for opts in (None, STRICT):
        np.testing.assert_allclose(_clean(k, x, options=opts), np.exp(x[0]), rtol=1e-5)


def test_a_tile_from_an_earlier_iteration_warns_and_is_e027_under_strict() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), F32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), F32, buffer=nl.sbuf)
        for i in nl.sequential_range(2):
            acc = nl.add(acc, nl.load(a[i]))
            nl.store(out[i], acc)
        return out

    x = _x(2, 128, 64)
    with pytest.warns(SimWarning, match="earlier iteration"):
        simulate_kernel(k, x)
    assert _code(k, x, options=STRICT) == "E027"


def test_a_loop_reduce_destination_stays_in_scope() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        b = nl.full((128, 64), -100.0, F32)
        for i in nl.sequential_range(2):
            b = nl.loop_reduce(nl.load(a[i]), op=np.maximum, loop_indices=[i])
        nl.store(out, b)
        return out

    x = _x(2, 128, 64)
    np.testing.assert_array_equal(_clean(k, x), x.max(axis=0))


def test_shared_hbm_in_a_static_range_is_e013() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        for _i in nl.static_range(1):
            tmp = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
            nl.store(tmp, nl.load(a))
        nl.store(out, nl.load(a))
        return out

    assert _code(k, _x(128, 64)) == "E013"


def test_a_jit_kernel_called_from_a_kernel_may_create_its_outputs() -> None:
    # sources silent on @nki.jit callees (decision): their top level is kernel level; a plain helper is E013
    @nki.jit
    def inner(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    @nki.jit
    def outer(a):
        return inner(a)

    x = _x(128, 64)
    np.testing.assert_array_equal(_clean(outer, x), x)


def test_race_messages_name_the_users_variables() -> None:
    """E029 names the tensor by the variable its allocation line assigns (`acc`), not the interpreter's id."""

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 64), F32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            acc[...] = nl.load(a[i])
        nl.store(out, acc)
        return out

    with pytest.raises(SimError, match=r"\[E029\] affine_range\(acc\): .* both write elements of `acc`") as e:
        simulate_kernel(k, _x(2, 128, 64))
    assert "`t" not in str(e.value)
