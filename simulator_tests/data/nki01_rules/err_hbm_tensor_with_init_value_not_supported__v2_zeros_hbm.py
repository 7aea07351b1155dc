"""err_hbm_tensor_with_init_value_not_supported (second form): nl.zeros placed in nl.hbm."""

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
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scratch = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.hbm)  # <- blame
    nl.store(out, nl.add(nl.load(a), nl.load(scratch)))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.hbm)
    nl.store(scratch, value=0.0)
    nl.store(out, nl.add(nl.load(a), nl.load(scratch)))
    return out


def reference(a):
    return a
