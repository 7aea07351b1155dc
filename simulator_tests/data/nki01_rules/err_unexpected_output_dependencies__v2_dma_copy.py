"""err_unexpected_output_dependencies (second form): every nl.affine_range iteration nisa.dma_copy-s into the same HBM
output.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unexpected_output_dependencies"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unexpected-output-dependencies"
CODE = "E029"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=out, src=a[i])  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(4):
        nisa.dma_copy(dst=out, src=a[i])
    return out


def reference(a):
    return a[3]
