"""nl.reduce_axis (second form): nisa.tensor_reduce over the partition axis."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.reduce_axis"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_reduce (axis: free dimensions only)"
CODE = "E023"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nisa.tensor_reduce(np.add, nl.load(a), axis=0, keepdims=True)  # <- blame
    nl.store(out[0:1, :], s)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nisa.tensor_reduce(np.add, nl.load(a), axis=1, keepdims=True)
    nl.store(out, s)
    return out


def reference(a):
    return a.sum(axis=1, keepdims=True)
