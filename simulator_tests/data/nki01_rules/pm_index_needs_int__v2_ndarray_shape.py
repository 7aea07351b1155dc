"""pm.index_needs_int (second form): an nl.ndarray shape computed from a symbolic loop index."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index); "
    "docs/nki-0.1-rules.md section 9"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        buf = nl.ndarray((128, 32 * (i + 1)), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
        buf[...] = 0.0
        nl.store(out[i], nl.load(a[i]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        buf = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        buf[...] = 0.0
        nl.store(out[i], nl.load(a[i]))
    return out


def reference(a):
    return a
