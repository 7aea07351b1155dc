"""err_unsupported_mixing_basic_advanced_tensor_indexing (second form): nl.load with an arange partition index and a
slice free index.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_mixing_basic_advanced_tensor_indexing"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-mixing-basic-advanced-tensor-indexing"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    t = nl.load(a[i_p, 0:64])  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(a[i_p, i_f])
    nl.store(out, t)
    return out


def reference(a):
    return a[:, :64]
