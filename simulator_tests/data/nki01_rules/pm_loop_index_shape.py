"""pm.index_needs_int: a tile shape computed from a symbolic loop index (shapes are trace-time ints)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index)"
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for i in nl.affine_range(2):
        t = nl.ndarray((64, 32 * (i + 1)), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
        t[...] = nl.load(a[i * 64 : (i + 1) * 64, 0 : 32 * (i + 1)])
        nl.store(out[i * 64 : (i + 1) * 64, 0 : 32 * (i + 1)], t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for i in nl.static_range(2):
        t = nl.ndarray((64, 32 * (i + 1)), dtype=nl.float32, buffer=nl.sbuf)
        t[...] = nl.load(a[i * 64 : (i + 1) * 64, 0 : 32 * (i + 1)])
        nl.store(out[i * 64 : (i + 1) * 64, 0 : 32 * (i + 1)], t)
    return out


def reference(a):
    r = np.zeros_like(a)
    r[:64, :32] = a[:64, :32]
    r[64:, :64] = a[64:, :64]
    return r
