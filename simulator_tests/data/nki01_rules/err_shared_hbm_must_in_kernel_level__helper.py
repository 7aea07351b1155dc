"""err_shared_hbm_must_in_kernel_level: an nl.shared_hbm tensor created in a helper function the kernel calls."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_shared_hbm_must_in_kernel_level"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-shared-hbm-must-in-kernel-level"
CODE = "E013"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


def _make_output(shape, dtype):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)  # <- blame


def _copy(src, dst):
    nl.store(dst, nl.load(src))


@nki.jit
def bad(a):
    out = _make_output(a.shape, a.dtype)
    _copy(a, out)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    _copy(a, out)
    return out


def reference(a):
    return a
