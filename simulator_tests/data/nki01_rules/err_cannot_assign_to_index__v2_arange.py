"""err_cannot_assign_to_index (second form): item assignment into an nl.arange index."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_cannot_assign_to_index"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-cannot-assign-to-index"
CODE = "E014"
STRICT = False


def inputs():
    return (np.zeros((1, 8), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    i_f = nl.arange(8)[None, :]
    i_f[0, 2] = 7  # <- blame
    nl.store(out, nisa.iota(i_f, dtype=nl.int32))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    i_f = nl.arange(8)[None, :]
    y = nisa.iota(i_f, dtype=nl.int32)
    y[0, 2] = 7
    nl.store(out, y)
    return out


def reference(a):
    r = np.arange(8, dtype=np.int32).reshape(1, 8)
    r[0, 2] = 7
    return r
