"""err_activation_scale_invalid_type (second form): a bfloat16 scale vector passed to nisa.activation."""

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
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    scale = nisa.memset((128, 1), 2.0, dtype=nl.bfloat16)
    r = nisa.activation(op=nl.exp, data=t, scale=scale)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    scale = nisa.memset((128, 1), 2.0, dtype=nl.float32)
    r = nisa.activation(op=nl.exp, data=t, scale=scale)
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a * 2.0)
