"""err_local_variable_used_out_of_scope: a tile bound inside the branches of an `if` on a loop index (a
predicated block) is used after the block; declare it before and assign with tmp[...] = ..."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_local_variable_used_out_of_scope"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-local-variable-used-out-of-scope"
CODE = "E027"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32))


@nki.jit
def bad(a, b):
    c = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(4):
        if i < 2:
            tmp = nl.load(a)
        else:
            tmp = nl.load(b)
        nl.store(c[i], tmp)  # <- blame
    return c


@nki.jit
def good(a, b):
    c = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(4):
        tmp = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        if i < 2:
            tmp[...] = nl.load(a)
        else:
            tmp[...] = nl.load(b)
        nl.store(c[i], tmp)
    return c


def reference(a, b):
    return np.stack([a, a, b, b])
