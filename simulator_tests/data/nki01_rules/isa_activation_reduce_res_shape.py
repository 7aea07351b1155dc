"""isa.activation_reduce_res: activation_reduce's reduce_res has the data's partition count and one element
per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.activation_reduce_res"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py activation_reduce"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(op=nl.exp, data=nl.load(a), reduce_op=nl.add, reduce_res=res)  # <- blame
    nl.store(out, res)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(op=nl.exp, data=nl.load(a), reduce_op=nl.add, reduce_res=res)
    nl.store(out, res)
    return out


def reference(a):
    return np.exp(a).sum(axis=1, keepdims=True)
