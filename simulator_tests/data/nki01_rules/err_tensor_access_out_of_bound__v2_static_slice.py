"""err_tensor_access_out_of_bound (second form): a constant slice that ends past the tensor's last column."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a[:, 256:768])  # <- blame
    nl.store(out[:, 0:512], value=t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a[:, 256:512])
    nl.store(out[:, 0:256], value=t)
    return out


def reference(a):
    return a[:, 256:512]
