"""err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel: a TensorE nc_transpose (its implicit
identity matrix cannot be allocated) in a kernel using direct allocation; use VectorE (32x32) or nc_matmul."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst"
    "#err-transpose-on-tensor-engine-not-allowed-in-allocated-kernel"
)
CODE = "E030"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    b = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    res = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0))
    b[...] = nl.load(a)
    res[...] = nisa.nc_transpose(b, engine=nisa.tensor_engine)  # <- blame
    r = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    r[...] = nl.copy(res)
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    b = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    r = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    b[...] = nl.load(a)
    r[...] = nisa.nc_transpose(b, engine=nisa.vector_engine)
    nl.store(out, r)
    return out


def reference(a):
    return a.T
