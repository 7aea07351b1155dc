"""pm.kernel_range (second form): float() of the index of a Python range loop in the kernel (it becomes
sequential_range).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.kernel_range"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py sequential_range (range in a kernel is "
    "replaced by sequential_range); "
    "general/nki/programming_model.rst (Index)"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((3, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(3):
        w = float(i) + 1.0  # <- blame
        nl.store(out[i], nl.multiply(nl.load(a[i]), w))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(3):
        w = float(i) + 1.0
        nl.store(out[i], nl.multiply(nl.load(a[i]), w))
    return out


def reference(a):
    return a * np.arange(1, 4, dtype=np.float32)[:, None, None]
