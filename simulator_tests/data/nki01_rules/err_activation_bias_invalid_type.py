"""err_activation_bias_invalid_type: the bias vector of nisa.activation must be fp32, fp16 or bf16."""

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
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    bias = nisa.memset((128, 1), 1, dtype=nl.int8)
    r = nisa.activation(op=nl.exp, data=t, bias=bias)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    bias = nisa.memset((128, 1), 1.0, dtype=nl.bfloat16)
    r = nisa.activation(op=nl.exp, data=t, bias=bias)
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a + 1.0)
