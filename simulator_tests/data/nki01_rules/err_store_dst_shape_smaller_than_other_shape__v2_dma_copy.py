"""err_store_dst_shape_smaller_than_other_shape (second form): nisa.dma_copy of a wide tile into a (P, 1) destination.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_store_dst_shape_smaller_than_other_shape"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-store-dst-shape-smaller-than-other-shape; "
    "general/nki/api/nki/isa/__init__.py dma_copy"
)
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nisa.dma_copy(dst=out, src=t)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nisa.dma_copy(dst=out, src=nl.sum(t, axis=1, keepdims=True))
    return out


def reference(a):
    return a.sum(axis=1, keepdims=True)
