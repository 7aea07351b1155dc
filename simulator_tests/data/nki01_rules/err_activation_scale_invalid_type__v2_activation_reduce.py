"""err_activation_scale_invalid_type (second form): a float16 scale vector passed to nisa.activation_reduce."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_activation_scale_invalid_type"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-activation-scale-invalid-type"
CODE = "E009"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    scale = nisa.memset((128, 1), 0.5, dtype=nl.float16)
    nisa.activation_reduce(op=nl.exp, data=t, reduce_op=np.add, reduce_res=res, scale=scale)  # <- blame
    nl.store(out, res)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    scale = nisa.memset((128, 1), 0.5, dtype=nl.float32)
    nisa.activation_reduce(op=nl.exp, data=t, reduce_op=np.add, reduce_res=res, scale=scale)
    nl.store(out, res)
    return out


def reference(a):
    return np.exp(a * 0.5).sum(axis=1, keepdims=True)
