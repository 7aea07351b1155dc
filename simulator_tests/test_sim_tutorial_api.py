"""The spec's tutorial-style API subsets (mgrid tiled matmul, SPMD attention with nl ops)
through the neuronxcc alias."""

import numpy as np
import pytest

from nki_kernels.sim import SimWarning, install_neuronxcc_alias
from sim_testing import load_data_module


@pytest.fixture(scope="module")
def mod():
    with install_neuronxcc_alias():
        import neuronxcc.nki as nki

        yield load_data_module("tutorial_style_kernels"), nki


def test_mgrid_tiled_matmul_with_sbuf_accumulator(mod, rng):
    m, nki = mod
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    with pytest.warns(SimWarning, match="read-modify-write"):  # SBUF += PSUM is flagged, still computed
        out = nki.simulate_kernel(m.tutorial_matmul, a, b)
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-4)


def test_spmd_attention_with_high_level_ops(mod, rng):
    m, nki = mod
    q, k, v = (rng.standard_normal((2, 3, 128, 64)).astype(np.float32) for _ in range(3))
    out = nki.simulate_kernel(m.tiny_causal_attention[2, 3], q, k, v, 0.125)
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_allclose(out, m.reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)
