"""err_nested_kernel_with_spmd_grid (second form): a traced sub-kernel launched with a 2-D SPMD grid from a kernel."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_nested_kernel_with_spmd_grid"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-nested-kernel-with-spmd-grid"
CODE = "E019"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.trace
def _scale(src, dst):
    nl.store(dst, nl.multiply(nl.load(src), 3.0))


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    _scale[2, 2](a, out)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    _scale(a, out)
    return out


def reference(a):
    return a * 3.0
