"""err_1d_arange_not_supported: a 1-D nl.arange used as a tile index (a tile index needs two axes)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_1d_arange_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-1d-arange-not-supported"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    i = nl.arange(64)
    e = nl.exp(t[i, 0])  # <- blame
    nl.store(out, e)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    i = nl.arange(64)[:, None]
    e = nl.exp(t[i, 0])
    nl.store(out, e)
    return out


def reference(a):
    return np.exp(a[:64])
