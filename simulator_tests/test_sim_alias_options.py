"""The neuronxcc alias, the backend switch, the CLI `run`, and the interpreter's own checks
(poison, affine_range shuffle, `+=` warning, trace contents)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from nki_kernels.sim import (
    SimOptions,
    SimWarning,
    alias_installed,
    install_neuronxcc_alias,
    nisa,
    nki,
    nl,
    simulate_kernel,
    trace_kernel,
)
from sim_testing import load_data_module

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
F32 = np.float32


def test_alias_runs_unmodified_kernel_file_and_is_reversible():
    assert "neuronxcc" not in sys.modules or not alias_installed()
    with install_neuronxcc_alias():
        assert alias_installed()
        import neuronxcc.nki.language as nl_alias

        assert nl_alias is nl
        mod = load_data_module("third_party_kernel")
        rng = np.random.default_rng(0)
        a = rng.standard_normal((128, 256)).astype(F32)
        b = rng.standard_normal((256, 128)).astype(F32)
        import neuronxcc.nki as nki_alias

        out = nki_alias.simulate_kernel(mod.scaled_transpose_add, a, b)
        assert np.all(np.isfinite(out)) and np.any(out != 0)
        np.testing.assert_allclose(out, a.T * 2 + b, rtol=1e-6)
    assert not alias_installed() and "neuronxcc.nki" not in sys.modules


def test_alias_restores_what_was_there():
    sentinel = object()
    sys.modules["neuronxcc"] = sentinel
    try:
        a = install_neuronxcc_alias()
        assert sys.modules["neuronxcc"] is not sentinel
        a.uninstall()
        assert sys.modules["neuronxcc"] is sentinel
    finally:
        sys.modules.pop("neuronxcc", None)


def test_cli_run_executes_a_user_file_under_the_alias():
    r = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", str(DATA / "third_party_kernel.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "third_party_kernel: max abs err" in r.stdout


def test_backend_sim_and_neuron_choices():
    code = "import nki_kernels.backend as b; print(b.NAME, b.nl.__name__)"
    env = dict(os.environ, NKI_BACKEND="sim")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.stdout.split() == ["sim", "nki_kernels.sim.nki01.language"], r.stderr
    env["NKI_BACKEND"] = "auto"  # no Neuron SDK here: auto falls back to the interpreter
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.stdout.split()[0] == "sim", r.stderr
    env["NKI_BACKEND"] = "neuron"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode != 0 and "NKI_BACKEND=neuron but neuronxcc.nki is not importable" in r.stderr
    env["NKI_BACKEND"] = "bogus"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode != 0 and "allowed values are auto, sim, neuron" in r.stderr


def _partial_writer():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        t[:, 0:4] = nl.load(a)  # columns 4..7 are never initialised
        nl.store(out, t)
        return out

    return k


def test_poison_exposes_reads_of_uninitialised_memory():
    a = np.ones((128, 4), F32)
    with pytest.warns(SimWarning, match="never-written"):
        out = simulate_kernel(_partial_writer(), a, options=SimOptions(poison=True))
    assert np.all(np.isnan(out[:, 4:])) and np.all(out[:, :4] == 1)
    out = simulate_kernel(_partial_writer(), a, options=SimOptions(poison=False))
    assert np.all(out[:, 4:] == 0)


def _carried():
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 8), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 1), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(8):  # a loop-carried dependency: wrong in affine_range
            acc = nl.add(nl.multiply(acc, 2.0), nl.load(a[0:1, i : i + 1]))
            nl.store(out[0:1, i : i + 1], acc)
        return out

    return k


def test_shuffled_affine_range_exposes_loop_carried_dependency():
    a = np.arange(8, dtype=F32).reshape(1, 8)
    # the source rule sees it too: `acc` read by a later iteration warns (docs/nki-0.1-rules.md §11.5)
    carried = pytest.warns(SimWarning, match="earlier iteration")
    with carried:
        in_order = simulate_kernel(_carried(), a)
    with carried:
        shuffled = simulate_kernel(_carried(), a, options=SimOptions(shuffle_affine_seed=3))
    assert not np.array_equal(in_order, shuffled)
    # the same seed gives the same order (reproducible failures)
    with carried:
        again = simulate_kernel(_carried(), a, options=SimOptions(shuffle_affine_seed=3))
    np.testing.assert_array_equal(shuffled, again)
    # under skip_middle_end_transformations affine_range is sequential: never shuffled
    k = nki.compiler.skip_middle_end_transformations(_carried())
    with carried:
        np.testing.assert_array_equal(simulate_kernel(k, a, options=SimOptions(shuffle_affine_seed=3)), in_order)


def test_plus_equals_outside_psum_warns_once_per_line():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 4), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(3):
            acc += nl.load(a)
        nl.store(out, acc)
        return out

    a = np.ones((128, 4), F32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = simulate_kernel(k, a)
    hits = [x for x in w if issubclass(x.category, SimWarning)]
    assert len(hits) == 1 and "VectorE read-modify-write" in str(hits[0].message)
    np.testing.assert_array_equal(out, 3 * a)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        simulate_kernel(k, a, options=SimOptions(warn_non_psum_accumulate=False))
    assert not [x for x in w if issubclass(x.category, SimWarning)]


def test_trace_records_engine_shapes_bytes_flops_and_lines():
    @nki.jit
    def k(lhsT, rhs):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        s = nl.load(lhsT)
        m = nl.load(rhs)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(s, m)
        r = nisa.activation(nl.exp, acc)
        nl.store(out, r)
        return out

    a = np.ones((128, 128), F32) / 128
    b = np.ones((128, 512), F32)
    out, tr = trace_kernel(k, a, b)
    np.testing.assert_allclose(out, np.e, rtol=1e-6)
    ops = [(e.op, e.engine) for e in tr.events]
    assert ops == [
        ("dma_copy", "DMA"),
        ("dma_copy", "DMA"),
        ("memset", "DVE"),
        ("nc_matmul", "PE"),
        ("activation", "ACT"),
        ("dma_copy", "DMA"),
    ]
    load = tr.events[1]
    assert load.bytes == 128 * 512 * 4 and load.payload.contiguous_bytes == 128 * 512 * 4
    assert load.payload.src == "hbm" and load.payload.dst == "sbuf" and load.partitions == 128
    mm = tr.events[3]
    assert mm.flops == 2 * 128 * 128 * 512 and mm.payload.accumulate and mm.in_dtypes == ("float32", "float32")
    act = tr.events[4]
    assert act.payload.psum_in and act.reads[0].alloc_id == mm.writes[0].alloc_id
    src = open(__file__).read().splitlines()
    assert "nisa.nc_matmul" in src[mm.line - 1] and os.path.basename(mm.file) == "test_sim_alias_options.py"
    assert tr.peak_psum_bytes_per_partition >= 2048


def test_options_validation_and_env(monkeypatch):
    with pytest.raises(ValueError, match="precision"):
        SimOptions(precision="exact")
    from nki_kernels.sim import options as opt

    monkeypatch.setenv("NKI_SIM_OPTIONS", "poison=0,shuffle_affine_seed=5,precision=compat")
    o = opt._from_env()
    assert (o.poison, o.shuffle_affine_seed, o.precision) == (False, 5, "compat")
    monkeypatch.setenv("NKI_SIM_OPTIONS", "nonsense=1")
    with pytest.raises(ValueError, match="unknown option"):
        opt._from_env()


def test_trace_only_mode_skips_math_but_keeps_the_trace():
    @nki.jit
    def k(lhsT, rhs):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))
        nl.store(out, nisa.tensor_copy(acc))
        return out

    a, b = np.ones((128, 128), F32), np.ones((128, 512), F32)
    full, t1 = trace_kernel(k, a, b)
    fast, t2 = trace_kernel(k, a, b, options=SimOptions(trace_only=True))
    assert [e.op for e in t1.events] == [e.op for e in t2.events]
    assert np.all(full == 128) and np.all(fast == 0)


def test_assigning_a_load_into_a_tile_is_one_dma():
    @nki.jit
    def k(a):
        buf = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        buf[:, 0:4] = nl.load(a)
        buf[:, 4:8] = nl.load(a)
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, buf)
        return out

    a = np.arange(512, dtype=F32).reshape(128, 4)
    out, tr = trace_kernel(k, a)
    np.testing.assert_array_equal(out, np.concatenate([a, a], axis=1))
    assert [e.op for e in tr.events] == ["dma_copy"] * 3
    assert tr.events[0].writes[0].alloc_id == tr.events[1].writes[0].alloc_id  # straight into buf


def test_trace_regions_of_disjoint_on_chip_slices_do_not_overlap():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        blk = nl.ndarray((128, 2, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=blk[:, 0, :], src=a[0:128, :])
        nisa.dma_copy(dst=blk[:, 1, :], src=a[128:256, :])
        cols = nl.ndarray((4, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)
        cols[1] = nl.load(a[0:128, 0:64])
        cols[2] = nl.load(a[0:128, 64:128])
        nisa.dma_copy(dst=out, src=blk[:, 0, :])
        return out

    with pytest.warns(SimWarning, match="block dimensions"):
        _, tr = trace_kernel(k, np.ones((256, 512), F32))
    w = [e.writes[0] for e in tr.events]
    assert (w[0].lo, w[0].hi, w[1].lo, w[1].hi) == (0, 2048, 2048, 4096)  # bytes within a partition
    assert not w[0].overlaps(w[1]) and not w[2].overlaps(w[3])
    assert tr.events[4].reads[0].overlaps(w[0]) and not tr.events[4].reads[0].overlaps(w[1])


def test_trace_region_of_arange_view_is_its_bounding_box_not_the_whole_tensor():
    @nki.jit
    def k(a):
        ring = nl.ndarray((128, 4, 64), nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        ring[i_p, 1, i_f] = nl.load(a)
        ring[i_p, 2, i_f] = nl.load(a)
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_copy(ring[:, 1, :]))
        return out

    out, tr = trace_kernel(k, np.ones((128, 64), F32))
    np.testing.assert_array_equal(out, 1)
    w1, w2 = tr.events[0].writes[0], tr.events[1].writes[0]
    assert (w1.lo, w1.hi, w2.lo, w2.hi) == (256, 512, 512, 768)
    assert tr.events[2].reads[0].overlaps(w1) and not tr.events[2].reads[0].overlaps(w2)
