"""pm.index_needs_int: a symbolic loop index as a dict key."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index)"
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    factor = {0: 1.0, 1: 3.0}
    for i in nl.sequential_range(2):
        nl.store(out[i], nl.multiply(nl.load(a[i]), factor[i]))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    factor = {0: 1.0, 1: 3.0}
    for i in nl.static_range(2):
        nl.store(out[i], nl.multiply(nl.load(a[i]), factor[i]))
    return out


def reference(a):
    return a * np.array([1.0, 3.0], np.float32)[:, None, None]
