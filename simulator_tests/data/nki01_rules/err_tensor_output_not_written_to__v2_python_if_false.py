"""err_tensor_output_not_written_to (second form): the only store to the output sits under a Python if that is False."""

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
    wide = tensor_in.shape[1] > 512
    if wide:
        nl.store(tensor_out, value=nl.load(tensor_in))
    return tensor_out


@nki.jit
def good(tensor_in):
    tensor_out = nl.ndarray(tensor_in.shape, dtype=tensor_in.dtype, buffer=nl.shared_hbm)
    wide = tensor_in.shape[1] > 512
    nl.store(tensor_out, value=0.0)
    if wide:
        nl.store(tensor_out, value=nl.load(tensor_in))
    return tensor_out


def reference(tensor_in):
    return np.zeros_like(tensor_in)
