"""err_tensor_access_out_of_bound (second form): a load of 128 rows from an HBM tensor that has 64."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    t = nl.load(a[i_p, i_f])  # <- blame
    nl.store(out[i_p, i_f], t, mask=i_p < 64)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    t = nl.load(a[i_p, i_f], mask=i_p < 64)
    nl.store(out[i_p, i_f], t, mask=i_p < 64)
    return out


def reference(a):
    return a
