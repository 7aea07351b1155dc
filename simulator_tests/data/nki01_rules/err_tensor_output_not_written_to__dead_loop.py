"""err_tensor_output_not_written_to: the only store to the output sits in a loop that runs zero times."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_output_not_written_to"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-output-not-written-to"
CODE = "E016"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(tensor_in):
    tensor_out = nl.ndarray(tensor_in.shape, dtype=tensor_in.dtype, buffer=nl.shared_hbm)  # <- blame
    M = 128
    N = M + 1
    for _i in nl.sequential_range(M // N):
        nl.store(tensor_out, value=nl.load(tensor_in))
    return tensor_out


@nki.jit
def good(tensor_in):
    tensor_out = nl.ndarray(tensor_in.shape, dtype=tensor_in.dtype, buffer=nl.shared_hbm)
    M = 128
    N = M + 1
    nl.store(tensor_out, value=0.0)
    for _i in nl.sequential_range(M // N):
        nl.store(tensor_out, value=nl.load(tensor_in))
    return tensor_out


def reference(tensor_in):
    return np.zeros_like(tensor_in)
