"""err_local_variable_used_out_of_scope (second form): a tile bound in an nl.sequential_range body is used after the
loop.
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
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(4):
        acc[...] = nl.add(acc, nl.load(a[i]))
        scaled = nl.multiply(acc, 0.25)
    nl.store(out, scaled)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(4):
        acc[...] = nl.add(acc, nl.load(a[i]))
    nl.store(out, nl.multiply(acc, 0.25))
    return out


def reference(a):
    return a.mean(axis=0)
