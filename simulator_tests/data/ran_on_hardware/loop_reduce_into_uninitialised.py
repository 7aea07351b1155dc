"""`acc[...] = nl.loop_reduce(part, op=np.add, loop_indices=[j])` into an nl.ndarray nobody initialised, then
rsqrt of the mean of squares and a scaled matmul through an identity transpose: the reduction starts with the
first iteration's value."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "zhang677/AccelOpt NKIBench rmsnorm_matmul (kernels generated from neuronx-cc output that ran on trn1/trn2)"
NKI = "0.1"


def inputs():
    rng = np.random.default_rng(21)
    return rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32)


@nki.jit
def kernel(x, w):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    zero = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    zero[...] = nisa.memset(shape=(128, 1), value=0.0, dtype=nl.float32)
    xt = nl.load(x)
    ss = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(2):
        sq = nisa.activation(op=nl.square, data=xt[:, j * 128 : (j + 1) * 128], bias=zero, scale=1.0)
        part = nisa.tensor_reduce(nl.add, data=sq, axis=[1])
        ss[...] = nl.loop_reduce(part, op=np.add, loop_indices=[j], dtype=nl.float32)
    inv = nisa.activation(op=nl.rsqrt, data=nl.multiply(ss, 1.0 / 256), bias=zero, scale=1.0)
    xn = nl.multiply(xt[:, 0:128], inv)
    xn_t = nl.copy(nisa.nc_transpose(xn))
    res = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
    res += nisa.nc_matmul(xn_t, nl.load(w))
    nl.store(out, nl.copy(res))
    return out


def reference(x, w):
    x = x.astype(np.float64)
    xn = x / np.sqrt((x * x).mean(axis=1, keepdims=True))
    return xn[:, 0:128] @ w
