"""err_unsupported_expression_in_mask (second form): a mask on the product of two loop indices (i * i)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_expression_in_mask"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-expression-in-mask"
CODE = "E015"
STRICT = False


def inputs():
    return (np.zeros((1, 8), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for i in nl.sequential_range(8):
        nl.store(out[i], 1.0, mask=i * i < 9)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for i in nl.sequential_range(8):
        nl.store(out[i], 1.0, mask=i < 3)
    return out


def reference(a):
    r = np.zeros((8, 1), np.float32)
    r[:3] = 1.0
    return r
