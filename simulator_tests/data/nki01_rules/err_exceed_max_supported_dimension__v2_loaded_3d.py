"""err_exceed_max_supported_dimension (second form): nl.transpose of a 3-D tile loaded from HBM."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_exceed_max_supported_dimension"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-exceed-max-supported-dimension"
CODE = "E020"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((64, 4, 16)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nl.transpose(t)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a[:, 0, :])
    r = nl.transpose(t)
    nl.store(out, r)
    return out


def reference(a):
    return a[:, 0, :].T
