"""err_exceed_max_supported_dimension: nl.transpose of a 3-D tile (it takes 2-D tiles)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_exceed_max_supported_dimension"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-exceed-max-supported-dimension"
CODE = "E020"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.zeros((64, 32, 2), dtype=nl.float32, buffer=nl.sbuf)
    nl.transpose(x)  # <- blame
    nl.store(out, nl.load(a))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    b = nl.transpose(x)
    nl.store(out, b)
    return out


def reference(a):
    return a.T
