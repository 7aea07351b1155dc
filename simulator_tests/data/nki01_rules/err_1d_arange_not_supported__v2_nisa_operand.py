"""err_1d_arange_not_supported (second form): an nisa op reading an SBUF tile indexed with a 1-D nl.arange."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_1d_arange_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-1d-arange-not-supported"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((32, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    i = nl.arange(32)
    r = nisa.activation(op=nl.exp, data=t[i, 0])  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((32, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.activation(op=nl.exp, data=t[0:32, 0:1])
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a[:32])
