"""isa.tensor_scalar_reduce_op: tensor_scalar_reduce's op0 is arithmetic (no bitvec operators)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.tensor_scalar_reduce_op"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_scalar_reduce"
CODE = "E021"
STRICT = False


def inputs():
    return (np.random.default_rng(0).integers(0, 100, (128, 64)).astype(np.int32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(  # <- blame
        data=nl.load(a),
        op0=np.bitwise_and,
        operand0=15,
        reduce_op=np.add,
        reduce_res=res,
    )
    nl.store(out, res)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(data=nl.load(a), op0=np.multiply, operand0=2, reduce_op=np.add, reduce_res=res)
    nl.store(out, res)
    return out


def reference(a):
    return (a * 2).sum(axis=1, keepdims=True).astype(np.float32)
