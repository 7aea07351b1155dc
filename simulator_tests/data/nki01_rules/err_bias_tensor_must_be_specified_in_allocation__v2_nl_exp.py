"""err_bias_tensor_must_be_specified_in_allocation (second form): nl.exp (an activation without a bias) in a
directly allocated kernel.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_bias_tensor_must_be_specified_in_allocation"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-bias-tensor-must-be-specified-in-allocation"
CODE = "E030"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    data = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    res = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    data[...] = nl.load(a)
    res[...] = nl.exp(data)  # <- blame
    nl.store(out, res)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    data = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    res = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    bias[...] = 0.0
    data[...] = nl.load(a)
    res[...] = nisa.activation(op=nl.exp, data=data, bias=bias)
    nl.store(out, res)
    return out


def reference(a):
    return np.exp(a)
