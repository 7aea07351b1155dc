"""err_unexpected_output_dependencies (second form): every nl.affine_range iteration assigns an nisa result to the same
SBUF tile.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unexpected_output_dependencies"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unexpected-output-dependencies"
CODE = "E029"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        buf[...] = nisa.activation(op=nl.exp, data=nl.load(a[i]))  # <- blame
        nl.store(out[i], buf)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        buf = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        buf[...] = nisa.activation(op=nl.exp, data=nl.load(a[i]))
        nl.store(out[i], buf)
    return out


def reference(a):
    return np.exp(a)
