"""err_cannot_update_immutable_parameter: a kernel argument is immutable unless annotated nt.mutable_tensor
(the documented fix: annotate it, and return it)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RULE = "err_cannot_update_immutable_parameter"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-cannot-update-immutable-parameter"
CODE = "E012"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(in_tensor):
    x = nl.load(in_tensor)
    y = nl.add(x, 1.0)
    nl.store(in_tensor, value=y)  # <- blame
    return in_tensor


@nki.jit
def good(in_tensor: nt.mutable_tensor):
    x = nl.load(in_tensor)
    y = nl.add(x, 1.0)
    nl.store(in_tensor, value=y)
    return in_tensor


def reference(in_tensor):
    return in_tensor + 1.0
