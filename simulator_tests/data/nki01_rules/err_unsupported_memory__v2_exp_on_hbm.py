"""err_unsupported_memory (second form): an nl compute op (nl.exp) applied directly to an HBM tensor."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_memory"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-memory"
CODE = "E007"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    e = nl.exp(a)  # <- blame
    nl.store(out, e)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    e = nl.exp(nl.load(a))
    nl.store(out, e)
    return out


def reference(a):
    return np.exp(a)
