"""da.mixed_allocation: once a kernel uses direct allocation, every tensor -- including an instruction's
result -- must be directly allocated (`t = nl.load(x)` creates an automatically allocated tile)."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.mixed_allocation"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_direct_allocation_guide.rst 'Common Errors' 1; "
    "general/nki/api/nki/compiler/sbuf.py auto_alloc"
)
CODE = "E030"
STRICT = False

# nl.exp is itself rejected in an allocated kernel (ERR err_bias_tensor_must_be_specified_in_allocation:
# "nl.exp maps to ... nisa.activation, must use nisa.activation and specify bias tensor"), so both
# forms use nisa.activation with a directly allocated bias tile.


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    bias[...] = 0.0
    t = nl.load(a)  # <- blame
    r[...] = nisa.activation(op=nl.exp, data=t, bias=bias)
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    bias[...] = 0.0
    t[...] = nl.load(a)
    r[...] = nisa.activation(op=nl.exp, data=t, bias=bias)
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a)
