"""err_ambiguous_tensor_truth_value: `not` on a multi-element tile (use ~)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_ambiguous_tensor_truth_value"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-ambiguous-tensor-truth-value"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    t = nl.load(a)
    n = not (t > 0)  # <- blame
    nl.store(out, n)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    t = nl.load(a)
    n = nl.logical_not(nl.greater(t, 0.0), dtype=nl.uint8)
    nl.store(out, n)
    return out


def reference(a):
    return (~(a > 0)).astype(np.uint8)
