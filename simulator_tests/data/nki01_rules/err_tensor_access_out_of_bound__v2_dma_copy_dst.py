"""err_tensor_access_out_of_bound (second form): nisa.dma_copy into a destination window past the output's end."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 96)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 160), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], value=0.0)
    nisa.dma_copy(dst=out[:, 96:192], src=a)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 160), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], value=0.0)
    nisa.dma_copy(dst=out[:, 64:160], src=a)
    return out


def reference(a):
    r = np.zeros((128, 160), np.float32)
    r[:, 64:] = a
    return r
