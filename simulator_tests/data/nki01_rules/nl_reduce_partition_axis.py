"""nl.reduce_axis: nl.sum/max/... reduce free axes, never the partition axis 0."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.reduce_axis"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py sum"
CODE = "E023"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.sum(nl.load(a), axis=0)  # <- blame
    nl.store(out, s)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.sum(nl.transpose(nl.load(a[:, 0:64])), axis=1, keepdims=True)
    nl.store(out, s)
    return out


def reference(a):
    return a[:, :64].sum(axis=0)[:, None]
