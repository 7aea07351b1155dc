"""isa.bitvec_int: bitvec reductions/ops (bitwise_and, ...) take integer tiles."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.bitvec_int"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_reduce, tensor_scalar"
CODE = "E009"
STRICT = False


def inputs():
    return (np.random.default_rng(0).integers(0, 255, (128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.tensor_reduce(np.bitwise_or, nl.load(a), axis=(1,), keepdims=True)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    r = nisa.tensor_reduce(np.bitwise_or, nl.load(a, dtype=nl.int32), axis=(1,), keepdims=True, dtype=nl.int32)
    nl.store(out, r)
    return out


def reference(a):
    return np.bitwise_or.reduce(a.astype(np.int32), axis=1, keepdims=True)
