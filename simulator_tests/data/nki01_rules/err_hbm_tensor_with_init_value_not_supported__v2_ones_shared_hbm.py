"""err_hbm_tensor_with_init_value_not_supported (second form): the kernel output created with nl.ones in shared_hbm."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_hbm_tensor_with_init_value_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-hbm-tensor-with-init-value-not-supported"
CODE = "E013"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ones((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=1.0)
    return out


def reference(a):
    return np.ones((128, 64), np.float32)
