"""err_local_variable_used_out_of_scope (second form): a tile bound in an inner loop body is used after the inner loop.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_local_variable_used_out_of_scope"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-local-variable-used-out-of-scope"
CODE = "E027"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((2, 2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    last = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.affine_range(2):
            t = nl.load(a[i, j])
            nl.store(out[i, j], t)
        nl.store(last[i], t)  # <- blame
    return out, last


@nki.jit
def good(a):
    out = nl.ndarray((2, 2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    last = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.affine_range(2):
            t = nl.load(a[i, j])
            nl.store(out[i, j], t)
        nl.store(last[i], nl.load(a[i, 1]))
    return out, last


def reference(a):
    return a, a[:, 1]
