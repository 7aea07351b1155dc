"""err_1d_arange_not_supported (second form): nl.load of an HBM tensor indexed with a 1-D nl.arange."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_1d_arange_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-1d-arange-not-supported"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 4)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.arange(64)
    t = nl.load(a[i, 0])  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.arange(64)[:, None]
    t = nl.load(a[i, 0])
    nl.store(out, t)
    return out


def reference(a):
    return a[:64, 0:1]
