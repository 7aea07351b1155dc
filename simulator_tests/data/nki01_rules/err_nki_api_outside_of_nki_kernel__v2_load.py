"""err_nki_api_outside_of_nki_kernel (second form): nl.load of a NumPy array from plain Python."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_nki_api_outside_of_nki_kernel"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-nki-api-outside-of-nki-kernel"
CODE = "E019"
STRICT = False
CALL = "direct"


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


def bad(a):
    return nl.exp(nl.load(a))  # <- blame


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(a)))
    return out


def reference(a):
    return np.exp(a)
