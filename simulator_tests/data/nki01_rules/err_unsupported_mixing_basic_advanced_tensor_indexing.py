"""err_unsupported_mixing_basic_advanced_tensor_indexing: a slice and an nl.arange index in one index tuple."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_mixing_basic_advanced_tensor_indexing"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-mixing-basic-advanced-tensor-indexing"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32),)


@nki.jit
def bad(x):
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    i = nl.arange(4)[:, None]
    c = nl.exp(a[i, :])  # <- blame
    nl.store(out, c)
    return out


@nki.jit
def good(x):
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    i = nl.arange(4)[:, None]
    j = nl.arange(4)[None, :]
    c = nl.exp(a[i, j])
    nl.store(out, c)
    return out


def reference(x):
    return np.exp(x)
