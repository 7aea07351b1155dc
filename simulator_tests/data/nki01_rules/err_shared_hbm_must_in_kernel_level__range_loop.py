"""err_shared_hbm_must_in_kernel_level: an nl.shared_hbm tensor created inside a Python `range` loop of the
kernel function (the compiler turns it into nl.sequential_range; the errors page's own example)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_shared_hbm_must_in_kernel_level"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-shared-hbm-must-in-kernel-level; "
    "general/nki/api/nki/language/__init__.py sequential_range (range becomes sequential_range)"
)
CODE = "E013"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(2):
        tmp = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)  # <- blame
        nl.store(tmp, nl.load(a[i]))
        nl.store(out[i], nl.load(tmp))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(2):
        nl.store(tmp[i], nl.load(a[i]))
        nl.store(out[i], nl.load(tmp[i]))
    return out


def reference(a):
    return a
