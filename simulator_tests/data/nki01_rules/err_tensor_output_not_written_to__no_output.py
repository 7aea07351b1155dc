"""err_tensor_output_not_written_to: an nki.jit kernel with no output at all (it returns nothing)."""

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
def bad(a):  # <- blame
    nl.exp(nl.load(a))


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(a)))
    return out


def reference(a):
    return np.exp(a)
