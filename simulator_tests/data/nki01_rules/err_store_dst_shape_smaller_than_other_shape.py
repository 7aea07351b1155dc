"""err_store_dst_shape_smaller_than_other_shape: an assignment whose destination is smaller than its value."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_store_dst_shape_smaller_than_other_shape"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-store-dst-shape-smaller-than-other-shape"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.load(a)
    y[...] = x  # <- blame
    nl.store(out, x)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.load(a)
    x[...] = y
    nl.store(out, x)
    return out


def reference(a):
    return np.broadcast_to(a, (128, 512))
