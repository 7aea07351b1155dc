"""isa.affine_select_pred: affine_select's pred is an affine expression known at compile time, not a tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.affine_select_pred"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py affine_select"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.affine_select(pred=nl.greater(t, 0.0), on_true_tile=t, on_false_value=0.0)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p, i_f = nl.mgrid[0:128, 0:128]
    r = nisa.affine_select(pred=(i_p >= i_f), on_true_tile=t, on_false_value=0.0)
    nl.store(out, r)
    return out


def reference(a):
    return np.tril(a)
