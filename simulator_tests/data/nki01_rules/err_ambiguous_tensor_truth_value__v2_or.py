"""err_ambiguous_tensor_truth_value (second form): Python 'or' between two comparison tiles."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_ambiguous_tensor_truth_value"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-ambiguous-tensor-truth-value"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    outside = nl.less(t, -1.0) or nl.greater(t, 1.0)  # <- blame
    nl.store(out, nl.where(outside, 0.0, t))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    outside = nl.less(t, -1.0) | nl.greater(t, 1.0)
    nl.store(out, nl.where(outside, 0.0, t))
    return out


def reference(a):
    return np.where((a < -1.0) | (a > 1.0), 0.0, a).astype(np.float32)
