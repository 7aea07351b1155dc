"""err_cannot_update_immutable_parameter (second form): nisa.dma_copy into a kernel argument not annotated mutable."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_cannot_update_immutable_parameter"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-cannot-update-immutable-parameter"
CODE = "E012"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(in_tensor):
    y = nl.add(nl.load(in_tensor), 1.0)
    nisa.dma_copy(dst=in_tensor, src=y)  # <- blame
    return in_tensor


@nki.jit
def good(in_tensor):
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    y = nl.add(nl.load(in_tensor), 1.0)
    nisa.dma_copy(dst=out_tensor, src=y)
    return out_tensor


def reference(in_tensor):
    return in_tensor + 1.0
