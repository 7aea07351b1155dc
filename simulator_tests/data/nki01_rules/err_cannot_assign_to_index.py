"""err_cannot_assign_to_index: item assignment into an nl.mgrid/nl.arange index (convert with nisa.iota first)."""

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
    out = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    _, x = nl.mgrid[0:1, 0:8]
    x[0, 5] = 1024  # <- blame
    nl.store(out, nisa.iota(x, dtype=nl.uint32))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    _, x = nl.mgrid[0:1, 0:8]
    y = nisa.iota(x, dtype=nl.uint32)
    y[0, 5] = 1024
    nl.store(out, y)
    return out


def reference(a):
    r = np.arange(8, dtype=np.uint32).reshape(1, 8)
    r[0, 5] = 1024
    return r
