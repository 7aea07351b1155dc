"""err_unexpected_output_dependencies (second form): nested nl.affine_range loops whose inner iterations all write the
same output tile.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unexpected_output_dependencies"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unexpected-output-dependencies"
CODE = "E029"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 3, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((2, 3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.affine_range(3):
            nl.store(out[i, 0], nl.load(a[i, j]))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((2, 3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.affine_range(3):
            nl.store(out[i, j], nl.load(a[i, j]))
    return out


def reference(a):
    return a
