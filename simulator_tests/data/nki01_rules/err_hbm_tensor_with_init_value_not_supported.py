"""err_hbm_tensor_with_init_value_not_supported: nl.full/zeros/ones with an HBM buffer."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_hbm_tensor_with_init_value_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-hbm-tensor-with-init-value-not-supported"
CODE = "E013"
STRICT = False


def inputs():
    return (np.zeros((3, 128, 512), np.float32),)


@nki.jit
def bad(a):
    t = nl.full((3, 128, 512), fill_value=1.0, dtype=nl.float32, buffer=nl.shared_hbm)  # <- blame
    return t


@nki.jit
def good(a):
    t = nl.ndarray((3, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        nl.store(t[i, :, :], value=1.0)
    return t


def reference(a):
    return np.ones((3, 128, 512), np.float32)
