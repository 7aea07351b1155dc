"""nl.expand_dims_axis: nl.expand_dims only adds axes after the last one."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.expand_dims_axis"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py expand_dims"
CODE = "E023"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 4)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 4, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.expand_dims(nl.load(a), axis=1)  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 4, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.expand_dims(nl.load(a), axis=2)
    nl.store(out, t)
    return out


def reference(a):
    return a[:, :, None]
