"""pm.index_needs_int: an nl.affine_range loop variable is a symbolic affine index at trace time, not a Python
int, so it cannot index a Python list (use nl.static_range for a list of tiles)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index); "
    "general/nki/api/nki/language/__init__.py affine_range (not unrolled until the compiler backend)"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scales = [1.0, 2.0]
    for i in nl.affine_range(2):
        nl.store(out[i], nl.multiply(nl.load(a[i]), scales[i]))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scales = [1.0, 2.0]
    for i in nl.static_range(2):
        nl.store(out[i], nl.multiply(nl.load(a[i]), scales[i]))
    return out


def reference(a):
    return a * np.array([1.0, 2.0], np.float32)[:, None, None]
