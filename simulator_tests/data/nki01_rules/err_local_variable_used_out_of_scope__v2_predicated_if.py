"""err_local_variable_used_out_of_scope (second form): a tile bound under a predicated if (no else) on a loop index is
used after it.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_local_variable_used_out_of_scope"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-local-variable-used-out-of-scope"
CODE = "E027"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        if i < 2:
            t = nl.exp(nl.load(a[i]))
        nl.store(out[i], t)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        if i < 2:
            t[...] = nl.exp(nl.load(a[i]))
        nl.store(out[i], t)
    return out


def reference(a):
    r = np.zeros_like(a)
    r[:2] = np.exp(a[:2])
    return r
