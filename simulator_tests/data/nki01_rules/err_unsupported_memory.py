"""err_unsupported_memory: an operand in the wrong memory (nl.load of an SBUF tile)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_memory"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-memory"
CODE = "E007"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    tmp = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
    tmp[...] = 0.0
    x = nl.load(tmp)  # <- blame
    nl.store(out, x)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    nl.store(out, nl.exp(x))
    return out


def reference(a):
    return np.exp(a)
