"""err_store_dst_shape_smaller_than_other_shape (second form): an nisa result assigned into a smaller SBUF tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_store_dst_shape_smaller_than_other_shape"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-store-dst-shape-smaller-than-other-shape"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    y[...] = nisa.tensor_copy(nl.load(a))  # <- blame
    nl.store(out, y)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    y[...] = nisa.tensor_copy(nl.load(a[:, 0:64]))
    nl.store(out, y)
    return out


def reference(a):
    return a[:, 0:64]
