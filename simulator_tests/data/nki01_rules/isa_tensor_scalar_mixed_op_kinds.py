"""isa.tensor_scalar_ops: tensor_scalar's op0 and op1 are both arithmetic or both bitvec."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.tensor_scalar_ops"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_scalar"
CODE = "E021"
STRICT = False


def inputs():
    return (np.random.default_rng(0).integers(0, 100, (128, 64)).astype(np.int32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    r = nisa.tensor_scalar(nl.load(a), np.add, 1, op1=np.bitwise_and, operand1=15, dtype=nl.int32)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    r = nisa.tensor_scalar(nl.load(a), np.bitwise_and, 15, op1=np.bitwise_or, operand1=16, dtype=nl.int32)
    nl.store(out, r)
    return out


def reference(a):
    return (a & 15) | 16
