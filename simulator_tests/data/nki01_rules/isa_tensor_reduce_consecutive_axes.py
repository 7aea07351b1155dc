"""isa.reduce_axes: tensor_reduce's axes are consecutive trailing free axes.  The trn2 toolchain accepts
non-adjacent axes (aws-neuron-sdk#1257; CS149 solutions passed on hardware with axis=(2, 4)): a warning by
default, an error under strict (README divergences)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.reduce_axes"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_reduce; aws-neuron-sdk#1257"
CODE = "E024"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 2, 4, 8)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.tensor_reduce(np.add, nl.load(a), axis=(1, 3))  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.tensor_reduce(np.add, nl.load(a), axis=(2, 3))
    nl.store(out, r)
    return out


def reference(a):
    return a.sum(axis=(2, 3))
