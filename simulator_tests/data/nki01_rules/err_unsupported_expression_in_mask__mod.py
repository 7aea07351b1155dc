"""err_unsupported_expression_in_mask: `i % 4` of a loop index is not affine, so not a mask."""

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
    for i in range(8):
        nl.store(out[i], 1.0, mask=(i % 4) < 2)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for i in range(8):
        nl.store(out[i], 1.0, mask=i < 4)
    for i in range(8):
        for j in range(8):
            nl.store(out[i], 2.0, mask=(2 * i + 3 * j + 1) < 4)
    return out


def reference(a):
    r = np.zeros((8, 1), np.float32)
    r[:4] = 1.0
    r[:2] = 2.0
    return r
