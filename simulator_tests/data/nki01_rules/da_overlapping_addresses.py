"""da.lifetime_overlap: two directly allocated tensors whose physical tiles overlap while both are live."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.lifetime_overlap"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_direct_allocation_guide.rst 'Common Errors' 3 (Lifetime Conflicts)"
CODE = "E030"
STRICT = False

# nl.exp is itself rejected in an allocated kernel (ERR err_bias_tensor_must_be_specified_in_allocation:
# "nl.exp maps to ... nisa.activation, must use nisa.activation and specify bias tensor"), so the good
# form uses nisa.activation with a directly allocated bias tile.


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    t0[...] = nl.load(a)
    t1[...] = nl.exp(t0)  # <- blame
    nl.store(out, nl.add(t0, t1))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t0 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t1 = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    s = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=6144))
    bias[...] = 0.0
    t0[...] = nl.load(a)
    t1[...] = nisa.activation(op=nl.exp, data=t0, bias=bias)
    s[...] = nl.add(t0, t1)
    nl.store(out, s)
    return out


def reference(a):
    return a + np.exp(a)
