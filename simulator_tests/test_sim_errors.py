"""One negative test per hardware-constraint class: the coded error, its exception class and
the kernel source line it points at (the line marked ``# <- name`` in this file)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from nki_kernels.sim import (
    NKISyntaxError,
    SimError,
    SimIndexError,
    SimNotImplementedError,
    SimOptions,
    SimRuntimeError,
    SimTypeError,
    SimValueError,
    SimWarning,
    nisa,
    nki,
    nl,
    simulate_kernel,
)

F32 = np.float32
_SRC = open(__file__).read().splitlines()


def line_of(tag: str) -> int:
    hits = [i + 1 for i, l in enumerate(_SRC) if l.rstrip().endswith(f"# <- {tag}")]
    assert len(hits) == 1, tag
    return hits[0]


def expect(exc_type, code, tag, kernel, *args, match=None, **kw):
    with pytest.raises(exc_type) as ei:
        simulate_kernel(kernel, *args, **kw)
    e = ei.value
    assert isinstance(e, SimError), type(e)
    assert e.code == code, str(e)
    assert str(e).startswith(f"[{code}] "), str(e)
    assert e.line == line_of(tag) and os.path.basename(e.file) == "test_sim_errors.py", str(e)
    assert str(e).endswith(f"at test_sim_errors.py:{line_of(tag)}")
    if match:
        assert match in str(e), str(e)
    return e


X = np.zeros((256, 512), F32)


def test_partition_dim_over_128_on_creation():
    @nki.jit
    def k(a):
        t = nl.ndarray((256, 1), nl.float32, buffer=nl.sbuf)  # <- par_create
        return a

    e = expect(
        SimValueError,
        "E001",
        "par_create",
        k,
        X,
        match="number of partitions 256 exceed architecture limitation of 128",
    )
    assert "got 256, limit 128" in str(e)


def test_partition_dim_over_128_on_load_and_ops():
    @nki.jit
    def k(a):
        t = nl.load(a)  # <- par_load
        return a

    expect(SimValueError, "E001", "par_load", k, X)


def test_partition_mismatch_between_operands():
    @nki.jit
    def k(a):
        x = nl.load(a[0:128, :])
        y = nl.load(a[0:1, :])
        z = nisa.tensor_tensor(x, y, nl.add)  # <- par_mismatch
        return a

    expect(SimValueError, "E002", "par_mismatch", k, X, match="mismatch in parameters")


@pytest.mark.parametrize("which", ["stationary", "moving", "contraction"])
def test_matmul_operand_limits(which):
    @nki.jit
    def k(a):
        s = nl.load(a[0:128, 0 : (256 if which == "stationary" else 128)])
        m = nl.load(a[0 : (64 if which == "contraction" else 128), 0 : (513 if which == "moving" else 512)])
        r = nisa.nc_matmul(s, m)  # <- mm_limit
        return a

    e = expect(SimValueError, "E003", "mm_limit", k, np.zeros((256, 600), F32))
    assert {"stationary": "limit 128", "moving": "limit 512", "contraction": "limit 128"}[which] in str(e)


def test_psum_tile_over_one_bank():
    @nki.jit
    def k(a):
        acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum)  # <- psum_bank
        return a

    expect(SimValueError, "E004", "psum_bank", k, X, match="2 KiB")


def test_psum_total_over_capacity():
    # the compiler frees a tile after its last use, the interpreter when nothing refers to it: the lenient rule
    # pm.psum_capacity (a warning blamed at the allocation that did not fit; E005 under strict)
    @nki.jit
    def k(a):
        tiles = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
        extra = nl.zeros((128, 512), nl.float32, buffer=nl.psum)  # <- psum_total
        return a

    expect(SimValueError, "E005", "psum_total", k, X, match="got 18432, limit 16384", options=SimOptions(strict=True))
    with pytest.warns(SimWarning, match=r"\[E005 under strict\] pm.psum_capacity.*got 18432, limit 16384") as w:
        simulate_kernel(k, X)
    assert w[0].lineno == line_of("psum_total")


def test_live_sbuf_over_capacity_names_the_tiles():
    # NKI 0.1 spills live SBUF (programming_model.rst "Memory hierarchy"): a warning by default, E006 under
    # strict, blamed at the allocation that did not fit (docs/nki-0.1-rules.md pm.sbuf_spill)
    @nki.jit
    def k(a):
        big = nl.ndarray((128, 40000), nl.float32, buffer=nl.sbuf)
        more = nl.ndarray((128, 20000), nl.float32, buffer=nl.sbuf)  # <- sbuf_total
        more[...] = 0.0
        return a

    e = expect(SimValueError, "E006", "sbuf_total", k, X, match="limit 212984", options=SimOptions(strict=True))
    assert "160000 B" in str(e)  # the largest live tile is listed with its size and origin
    with pytest.warns(SimWarning, match=r"\[E006 under strict\] pm.sbuf_spill: .*spills"):
        simulate_kernel(k, X)


def test_sbuf_is_released_when_tiles_die():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(8):
            t = nl.ndarray((128, 30000), nl.float32, buffer=nl.sbuf)  # 120 KB/partition, one at a time
            t[...] = 0.0
        nl.store(out, nl.load(a[0:128, :]))
        return out

    simulate_kernel(k, X)


@pytest.mark.parametrize("case", ["dma_from_psum", "load_from_sbuf", "compute_on_hbm", "gpsimd_on_psum"])
def test_wrong_memory_space(case):
    @nki.jit
    def k(a):
        s = nl.load(a[0:128, 0:128])
        if case == "dma_from_psum":
            p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
            nisa.dma_copy(dst=a[0:128, 0:128], src=p)  # <- space_dma_from_psum
        elif case == "load_from_sbuf":
            nl.load(s)  # <- space_load_from_sbuf
        elif case == "gpsimd_on_psum":
            p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
            nisa.tensor_scalar(p, nl.multiply, 2.0, engine=nisa.gpsimd_engine)  # <- space_gpsimd_on_psum
        else:
            nl.exp(a)  # <- space_compute_on_hbm
        return a

    e = expect(SimTypeError, "E007", f"space_{case}", k, X)
    assert "address space" in str(e)


@pytest.mark.parametrize("case", ["slice_stop", "int_index", "arange"])
def test_out_of_range_index_is_an_error_not_clamped(case):
    @nki.jit
    def k(a):
        if case == "slice_stop":
            t = nl.load(a[0:128, 500:520])  # <- oob_slice_stop
        elif case == "int_index":
            t = nl.load(a[300:301, 0:4])  # <- oob_int_index
        else:
            i_p, i_f = nl.mgrid[0:128, 0:600]
            t = nl.load(a[i_p, i_f])  # <- oob_arange
        return a

    e = expect(SimIndexError, "E008", f"oob_{case}", k, X)
    assert "Out-of-bound access" in str(e)


@pytest.mark.parametrize("case", ["matmul_int", "activation_bias_int"])
def test_illegal_dtype_for_op(case):
    @nki.jit
    def k(a):
        t = nl.load(a[0:128, 0:128])
        i = nisa.tensor_copy(t, dtype=nl.int32)
        if case == "matmul_int":
            nisa.nc_matmul(i, t)  # <- dtype_matmul_int
        else:
            nisa.activation(nl.exp, t, bias=i[:, 0:1])  # <- dtype_activation_bias_int
        return a

    expect(SimTypeError, "E009", f"dtype_{case}", k, X)


def test_operand_whose_partition_axis_is_not_leading():
    @nki.jit
    def k(a):
        b = nl.ndarray((2, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)
        b[...] = 0.0
        nl.exp(b[:, :, 0])  # <- not_tile
        return a

    with pytest.warns(Warning, match="block dimensions"):
        expect(SimTypeError, "E010", "not_tile", k, X, match="Failed to infer tile")


def test_store_destination_smaller_than_value():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[0:128, 0:8]))  # <- dst_small
        return out

    expect(SimValueError, "E011", "dst_small", k, X, match="Illegal assignment destination shape")


def test_write_to_kernel_input():
    @nki.jit
    def k(a):
        nl.store(a[0:128, 0:4], 1.0)  # <- immutable
        return a

    expect(SimTypeError, "E012", "immutable", k, X, match="Cannot update immutable parameter `a`")


def test_hbm_with_init_value():
    @nki.jit
    def k(a):
        z = nl.zeros((4, 4), nl.float32, buffer=nl.shared_hbm)  # <- hbm_init
        return a

    expect(NKISyntaxError, "E013", "hbm_init", k, X)


def test_1d_arange_and_mixed_indexing():
    @nki.jit
    def k1(a):
        t = nl.load(a[nl.arange(128), nl.arange(4)])  # <- arange_1d
        return a

    @nki.jit
    def k2(a):
        t = nl.load(a[nl.arange(128)[:, None], 0:4])  # <- mixed_index
        return a

    expect(NKISyntaxError, "E014", "arange_1d", k1, X, match="1d arange")
    expect(NKISyntaxError, "E014", "mixed_index", k2, X, match="Mixing basic")


def test_python_and_on_mask_expressions_is_an_error_under_strict():
    # accepted with a warning by default (test_sim_semantics), E024 under strict
    @nki.jit
    def k(a):
        i_p, i_f = nl.mgrid[0:128, 0:4]
        t = nl.load(a[i_p, i_f], mask=(i_p < 64) and (i_f < 2))  # <- mask_and
        return a

    expect(SimValueError, "E024", "mask_and", k, X, match="combine predicates with &", options=SimOptions(strict=True))


def test_output_never_written():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)  # <- unwritten
        return out

    expect(SimValueError, "E016", "unwritten", k, X, match="never written")


def test_program_id_axis_out_of_grid():
    @nki.jit
    def k(a):
        i = nl.program_id(1)  # <- pid
        return a

    expect(SimIndexError, "E017", "pid", k[2], X)


def test_float64_input_is_rejected_before_running():
    @nki.jit
    def k(a):
        return a

    with pytest.raises(SimValueError, match=r"\[E018\].*float64"):
        simulate_kernel(k, np.zeros((4, 4)))


def test_api_outside_kernel():
    with pytest.raises(SimRuntimeError, match=r"\[E019\].*outside of NKI kernels"):
        nl.ndarray((4, 4), nl.float32)


def test_transpose_limits():
    @nki.jit
    def k(a):
        t = nl.load(a[0:128, 0:256])
        nisa.nc_transpose(t)  # <- transpose_limit
        return a

    expect(SimValueError, "E020", "transpose_limit", k, X, match="exceed architecture limitation of 128")


def test_unsupported_op_code():
    @nki.jit
    def k(a):
        t = nl.load(a[0:128, 0:4])
        nisa.tensor_reduce(nl.exp, t, axis=1)  # <- bad_op
        return a

    expect(NKISyntaxError, "E021", "bad_op", k, X, match="is not supported in 'tensor_reduce'")


def test_reshape_of_non_contiguous_view():
    @nki.jit
    def k(a):
        v = a[:, 0:4].reshape((256 * 4,))  # <- reshape
        return a

    expect(SimNotImplementedError, "E022", "reshape", k, X, match="reshape not implemented for base tensor")


def test_reduce_over_partition_axis():
    @nki.jit
    def k(a):
        t = nl.load(a[0:128, 0:4])
        nl.sum(t, axis=0)  # <- reduce_axis0
        return a

    expect(SimValueError, "E023", "reduce_axis0", k, X)


def test_device_only_apis_say_so():
    @nki.jit
    def k(a):
        return a

    with pytest.raises(SimRuntimeError, match=r"\[E099\] nki.baremetal.*needs a Neuron device"):
        nki.baremetal(k)(X)
    with pytest.raises(SimRuntimeError, match="use simulate_kernel|nki.simulate_kernel"):
        nki.benchmark(warmup=2, iters=5)(k)(X)


def test_unimplemented_api_is_named_not_attribute_error():
    msg = r"nki.isa.builtin_custom_op is not implemented in nki_kernels.sim"
    with pytest.raises(SimNotImplementedError, match=msg):
        nisa.builtin_custom_op
    with pytest.raises(NotImplementedError, match="nki.language.atomic_rmw"):
        nl.atomic_rmw
    with pytest.raises(AttributeError):
        nl._private_name


def test_errors_are_builtin_subclasses():
    assert issubclass(SimValueError, ValueError) and issubclass(SimTypeError, TypeError)
    assert issubclass(SimIndexError, IndexError) and issubclass(NKISyntaxError, ValueError)
