"""err_mutable_parameter_not_returned: a parameter annotated nt.mutable_tensor and written must be returned."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RULE = "err_mutable_parameter_not_returned"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-mutable-parameter-not-returned"
CODE = "E016"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(in_tensor: nt.mutable_tensor):
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    y = nl.add(nl.load(in_tensor), 1.0)
    nl.store(out_tensor, value=y)
    nl.store(in_tensor, value=y)
    return out_tensor  # <- blame


@nki.jit
def good(in_tensor: nt.mutable_tensor):
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    y = nl.add(nl.load(in_tensor), 1.0)
    nl.store(out_tensor, value=y)
    nl.store(in_tensor, value=y)
    return out_tensor, in_tensor


def reference(in_tensor):
    return in_tensor + 1.0, in_tensor + 1.0
