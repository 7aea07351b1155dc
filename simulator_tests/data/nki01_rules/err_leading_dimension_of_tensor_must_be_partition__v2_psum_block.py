"""err_leading_dimension_of_tensor_must_be_partition (second form): a PSUM tensor with a block dimension in
front of the partition axis.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_leading_dimension_of_tensor_must_be_partition"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-leading-dimension-of-tensor-must-be-partition"
CODE = "E010"
STRICT = True


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((2, 128, 64)).astype(np.float32))


@nki.jit
def bad(w, x):
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.psum)  # <- blame
    st = nl.load(w)
    for i in nl.affine_range(2):
        acc[i] = nisa.nc_matmul(st, nl.load(x[i]))
        nl.store(out[i], acc[i])
    return out


@nki.jit
def good(w, x):
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 2, 64), dtype=nl.float32, buffer=nl.psum)
    st = nl.load(w)
    for i in nl.affine_range(2):
        acc[:, i, :] = nisa.nc_matmul(st, nl.load(x[i]))
        nl.store(out[i], acc[:, i, :])
    return out


def reference(w, x):
    return np.einsum("km,bkn->bmn", w, x)
