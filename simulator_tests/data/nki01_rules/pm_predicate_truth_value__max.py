"""pm.predicate_truth_value (second form): max() of a symbolic loop index and an int.  Python's max keeps the
second operand when `1 > i` is true, and the traced comparison is always true: max(i, 1) is 1 for every
iteration on hardware.  A warning by default, an error under strict."""

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
        w = max(i, 1)  # <- blame
        nl.store(out[i], nl.multiply(nl.load(a[i]), w))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(3):
        w = max(i, 1)
        nl.store(out[i], nl.multiply(nl.load(a[i]), w))
    return out


def reference(a):
    return a * np.array([1, 1, 2], np.float32)[:, None, None]
