"""err_activation_bias_invalid_type (second form): an int32 bias vector passed to nisa.activation_reduce."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_activation_bias_invalid_type"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-activation-bias-invalid-type"
CODE = "E009"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    bias = nisa.memset((128, 1), 1, dtype=nl.int32)
    nisa.activation_reduce(op=nl.exp, data=t, reduce_op=np.add, reduce_res=res, bias=bias)  # <- blame
    nl.store(out, res)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    bias = nisa.memset((128, 1), 1.0, dtype=nl.float32)
    nisa.activation_reduce(op=nl.exp, data=t, reduce_op=np.add, reduce_res=res, bias=bias)
    nl.store(out, res)
    return out


def reference(a):
    return np.exp(a + 1.0).sum(axis=1, keepdims=True)
