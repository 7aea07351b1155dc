"""err_tensor_access_out_of_bound (second form): nisa.dma_copy from a source window past the tensor's end."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound; "
    "general/nki/api/nki/isa/__init__.py dma_copy"
)
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a[:, 64:192])  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a[:, 64:128])
    return out


def reference(a):
    return a[:, 64:128]
