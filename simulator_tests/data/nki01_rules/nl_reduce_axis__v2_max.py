"""nl.reduce_axis (second form): nl.max over axis 0 (the partition axis)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.reduce_axis"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py max (axis: free dimensions only)"
CODE = "E023"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nl.max(nl.load(a), axis=0)  # <- blame
    nl.store(out[0:1, :], m)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nl.max(nl.load(a), axis=1, keepdims=True)
    nl.store(out, m)
    return out


def reference(a):
    return a.max(axis=1, keepdims=True)
