"""err_local_variable_used_out_of_scope: a tile created in an nl.affine_range body is used after the loop."""

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
    last = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.exp(nl.load(a[i]))
        nl.store(out[i], t)
    nl.store(last, t)  # <- blame
    return out, last


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    last = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.exp(nl.load(a[i]))
        nl.store(out[i], t)
    nl.store(last, nl.exp(nl.load(a[3])))
    return out, last


def reference(a):
    return np.exp(a), np.exp(a[3])
