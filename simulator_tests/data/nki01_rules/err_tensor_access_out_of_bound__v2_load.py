"""err_tensor_access_out_of_bound (second form): an nl.load whose affine index runs past the HBM input's end."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1000)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        ix = nl.mgrid[0:128, 0:512]
        t = nl.load(a[ix.p, i * 512 + ix.x])  # <- blame
        nl.store(out[ix.p, i * 512 + ix.x], value=t, mask=i * 512 + ix.x < 1000)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        ix = nl.mgrid[0:128, 0:512]
        t = nl.load(a[ix.p, i * 512 + ix.x], mask=i * 512 + ix.x < 1000)
        nl.store(out[ix.p, i * 512 + ix.x], value=t, mask=i * 512 + ix.x < 1000)
    return out


def reference(a):
    return a
