"""err_unsupported_memory (second form): nl.store whose destination is a PSUM tile, not HBM."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_memory"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-memory; "
    "general/nki/api/nki/language/__init__.py store (dst: HBM tensor)"
)
CODE = "E007"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nl.store(acc, nl.load(a))  # <- blame
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    acc[...] = nisa.tensor_copy(nl.load(a))
    nl.store(out, acc)
    return out


def reference(a):
    return a
