"""err_unsupported_expression_in_mask: a mask computed from tensor values (a runtime value)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_expression_in_mask"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-expression-in-mask"
CODE = "E015"
STRICT = False


def inputs():
    return (np.full((1, 8), 3.0, np.float32),)


@nki.jit
def bad(n):
    out = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(n)
    nl.store(out, 0.0, mask=t > 2)  # <- blame
    return out


@nki.jit
def good(n):
    out = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(n)
    nl.store(out, nl.where(nl.greater(t, 2.0), 0.0, t))
    return out


def reference(n):
    return np.where(n > 2, 0.0, n).astype(np.float32)
