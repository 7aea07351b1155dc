"""err_nki_api_outside_of_nki_kernel (second form): an nki.isa call (memset) from plain Python."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
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
    return nisa.memset((128, 64), 0.0, dtype=nl.float32)  # <- blame


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.memset((128, 64), 0.0, dtype=nl.float32))
    return out


def reference(a):
    return np.zeros_like(a)
