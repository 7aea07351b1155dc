"""ki.top_level_hbm (second form): the second of two kernel results is an SBUF tile, not an HBM tensor."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.top_level_hbm"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Unsupported Syntax' 1"
CODE = "E007"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, t)
    sq = nisa.activation(op=nl.square, data=t)
    return out, sq  # <- blame


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out_sq = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, t)
    nl.store(out_sq, nisa.activation(op=nl.square, data=t))
    return out, out_sq


def reference(a):
    return a, a * a
