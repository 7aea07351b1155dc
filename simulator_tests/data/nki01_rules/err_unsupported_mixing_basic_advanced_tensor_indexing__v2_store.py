"""err_unsupported_mixing_basic_advanced_tensor_indexing (second form): nl.store to a destination indexed with a slice
and an arange.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_mixing_basic_advanced_tensor_indexing"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-mixing-basic-advanced-tensor-indexing"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_f = nl.arange(64)[None, :]
    t = nl.load(a)
    nl.store(out[:, i_f], t)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out[:, :], t)
    return out


def reference(a):
    return a
