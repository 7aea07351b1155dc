"""err_tensor_access_out_of_bound (second form): a loop index walks an nisa operand window past an SBUF tile's end."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    for i in nl.affine_range(3):
        r = nisa.activation(op=nl.exp, data=t[:, i * 64 : i * 64 + 64])  # <- blame
        nl.store(out[i], r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    for i in nl.affine_range(3):
        r = nisa.activation(op=nl.exp, data=t[:, i * 32 : i * 32 + 64])
        nl.store(out[i], r)
    return out


def reference(a):
    return np.stack([np.exp(a[:, i * 32 : i * 32 + 64]) for i in range(3)])
