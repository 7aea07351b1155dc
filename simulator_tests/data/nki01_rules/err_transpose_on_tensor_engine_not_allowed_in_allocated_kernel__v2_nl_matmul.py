"""err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel (second form): nl.matmul without
transpose_x=True in a directly allocated kernel.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
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
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    y_sb = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=128))
    res = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0))
    r = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=256))
    x_sb[...] = nl.load(xT)
    y_sb[...] = nl.load(y)
    res[...] = nl.matmul(x_sb, y_sb)  # <- blame
    r[...] = nl.copy(res)
    nl.store(out, r)
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    y_sb = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=128))
    res = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0))
    r = nl.ndarray((nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=256))
    x_sb[...] = nl.load(xT)
    y_sb[...] = nl.load(y)
    res[...] = nl.matmul(x_sb, y_sb, transpose_x=True)
    r[...] = nl.copy(res)
    nl.store(out, r)
    return out


def reference(xT, y):
    return xT.T @ y
