"""err_activation_scale_scalar_or_vector (second form): a (1, P) row passed as the activation scale."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_activation_scale_scalar_or_vector"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-activation-scale-scalar-or-vector"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    scale = nisa.memset((1, 128), 0.5, dtype=nl.float32)
    r = nisa.activation(op=nl.exp, data=t, scale=scale)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    scale = nisa.memset((128, 1), 0.5, dtype=nl.float32)
    r = nisa.activation(op=nl.exp, data=t, scale=scale)
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a * 0.5)
