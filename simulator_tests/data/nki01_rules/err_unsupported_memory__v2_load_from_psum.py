"""err_unsupported_memory (second form): nl.load whose source is a PSUM tile, not HBM."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_memory"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-memory; "
    "general/nki/api/nki/language/__init__.py load (src: HBM tensor)"
)
CODE = "E007"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
    t = nl.load(acc)  # <- blame
    nl.store(out, nl.add(t, nl.load(a)))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
    t = nl.copy(acc)
    nl.store(out, nl.add(t, nl.load(a)))
    return out


def reference(a):
    return a
