"""err_tensor_output_not_written_to (second form): one of two returned outputs is never written."""

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
def bad(a):
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)  # <- blame
    nl.store(y, nl.exp(nl.load(a)))
    return y, z


@nki.jit
def good(a):
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(y, nl.exp(t))
    nl.store(z, nl.negative(t))
    return y, z


def reference(a):
    return np.exp(a), -a
