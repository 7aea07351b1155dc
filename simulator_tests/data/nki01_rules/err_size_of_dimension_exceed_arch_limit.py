"""err_size_of_dimension_exceed_arch_limit: nl.transpose of a (128, 512) tile (both axes at most 128)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_size_of_dimension_exceed_arch_limit"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-size-of-dimension-exceed-arch-limit"
CODE = "E020"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((512, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    b = nl.transpose(x)  # <- blame
    nl.store(out, b)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((512, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    for j in nl.affine_range(4):
        x = nl.load(a[:, j * 128 : (j + 1) * 128])
        nl.store(out[j * 128 : (j + 1) * 128, :], nl.transpose(x))
    return out


def reference(a):
    return a.T
