"""pm.predicate_truth_value: bool() of a symbolic loop index outside an if statement.  The traced object has no
Python value and Python treats it as true (spec corrections turn 4, item I): every iteration sees True.  No source
documents an error: a warning by default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.predicate_truth_value"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index: no Python value); "
    "spec corrections turn 4, item I"
)
CODE = "E028"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((3, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        nonzero = bool(i)  # <- blame
        nl.store(out[i], nl.multiply(nl.load(a[i]), 2.0 if nonzero else 1.0))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(3):
        nonzero = bool(i)
        nl.store(out[i], nl.multiply(nl.load(a[i]), 2.0 if nonzero else 1.0))
    return out


def reference(a):
    return a * np.array([1, 2, 2], np.float32)[:, None, None]
