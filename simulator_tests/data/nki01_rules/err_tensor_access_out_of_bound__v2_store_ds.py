"""err_tensor_access_out_of_bound (second form): nl.store through nl.ds tiles whose last tile passes the end."""

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
    for i in nl.affine_range(3):
        t = nl.exp(nl.load(a[:, nl.ds(i * 128, 192)]))
        nl.store(out[:, nl.ds(i * 192, 192)], t)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.exp(nl.load(a[:, nl.ds(i * 128, 128)]))
        nl.store(out[:, nl.ds(i * 128, 128)], t)
    return out


def reference(a):
    return np.exp(a)
