"""The spec's first minimal API subset (CS149 part 1 style), through the neuronxcc alias."""

import numpy as np
import pytest

from nki_kernels.sim import install_neuronxcc_alias
from sim_testing import load_data_module


@pytest.fixture(scope="module")
def mod():
    with install_neuronxcc_alias():
        import neuronxcc.nki as nki

        yield load_data_module("part1_style_kernels"), nki


def _nonzero_finite(x):
    assert np.all(np.isfinite(x)) and np.any(x != 0)


def test_vector_adds(mod, rng):
    m, nki = mod
    a = rng.standard_normal(128).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    out = nki.simulate_kernel(m.add_naive, a, b)
    _nonzero_finite(out)
    np.testing.assert_array_equal(out, a + b)
    a = rng.standard_normal(25600).astype(np.float32)
    b = rng.standard_normal(25600).astype(np.float32)
    out = nki.simulate_kernel(m.add_stream, a, b, 100)
    assert out.shape == (25600,)
    _nonzero_finite(out)
    np.testing.assert_array_equal(out, a + b)
    col = rng.standard_normal(128).astype(np.float32)
    t = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(m.add_scalar_columns, t, col), t + col[:, None])


def test_transpose_1024(mod, rng):
    m, nki = mod
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    out = nki.simulate_kernel(m.transpose, x)
    _nonzero_finite(out)
    np.testing.assert_array_equal(out, x.T)


def test_partition_limit_error_text(mod):
    m, nki = mod
    with pytest.raises(ValueError, match="number of partitions 256 exceed architecture limitation of 128"):
        nki.simulate_kernel(m.too_many_partitions, np.zeros((4,), np.float32))
