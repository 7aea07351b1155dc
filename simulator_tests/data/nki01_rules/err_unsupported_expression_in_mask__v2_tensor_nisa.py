"""err_unsupported_expression_in_mask (second form): an nisa compute op masked by a loaded tile's values."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_expression_in_mask"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-expression-in-mask"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.tensor_scalar(t, np.multiply, 2.0, mask=nl.greater(t, 0.0))  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.tensor_scalar(t, np.multiply, 2.0)
    nl.store(out, nl.where(nl.greater(t, 0.0), r, t))
    return out


def reference(a):
    return np.where(a > 0, a * 2.0, a).astype(np.float32)
