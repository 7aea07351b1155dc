"""err_tensor_access_out_of_bound: an affine access past the end of a tensor (mask it)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.zeros((128, 4000), np.float32),)


@nki.jit
def bad(a):
    x = nl.ndarray((128, 4000), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range((4000 + 512 - 1) // 512):
        tile = nl.mgrid[0:128, 0:512]
        nl.store(x[tile.p, i * 512 + tile.x], value=1.0)  # <- blame
    return x


@nki.jit
def good(a):
    x = nl.ndarray((128, 4000), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range((4000 + 512 - 1) // 512):
        tile = nl.mgrid[0:128, 0:512]
        nl.store(x[tile.p, i * 512 + tile.x], value=1.0, mask=i * 512 + tile.x < 4000)
    return x


def reference(a):
    return np.ones((128, 4000), np.float32)
