"""pm.predicate_truth_value (third form): min() of an int and a loop-index expression as the bound of a mask, the
way CS149 conv solutions that ran on trn2 size the ragged last tile.  The traced comparison inside min() is
always true, so the mask is `i_p < n - p * 128` for every iteration -- which is the right mask for tiles of at most
128 rows.  It runs, with the values the hardware computes; a warning by default (the condition is not what it
reads as), an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.predicate_truth_value"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index: no Python value); "
    "spec corrections turn 4, item I (CS149 solutions that ran on trn2)"
)
CODE = "E028"
STRICT = True
N = 300


def inputs():
    return (np.random.default_rng(3).standard_normal((N, 96)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((N, 96), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(96)[None, :]
    for p in nl.affine_range((N + 127) // 128):
        rows = min(128, N - p * 128)  # <- blame
        t = nl.load(a[p * 128 + i_p, i_f], mask=(i_p < rows))
        nl.store(out[p * 128 + i_p, i_f], nl.multiply(t, 2.0, mask=(i_p < rows)), mask=(i_p < rows))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((N, 96), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(96)[None, :]
    for p in nl.affine_range((N + 127) // 128):
        t = nl.load(a[p * 128 + i_p, i_f], mask=(p * 128 + i_p < N))
        nl.store(out[p * 128 + i_p, i_f], nl.multiply(t, 2.0, mask=(p * 128 + i_p < N)), mask=(p * 128 + i_p < N))
    return out


def reference(a):
    return a * 2.0
