"""da.implicit_tensors: APIs that lower to several instructions with compiler-made intermediates (nl.softmax,
...) are not allowed in a kernel using direct allocation."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.implicit_tensors"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_direct_allocation_guide.rst 'Common Errors' 2"
CODE = "E030"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    r = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    t[...] = nl.load(a)
    r[...] = nl.softmax(t, axis=1)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    r = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    bias[...] = 0.0
    t[...] = nl.load(a)
    r[...] = nisa.activation(op=nl.exp, data=t, bias=bias)
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a)
