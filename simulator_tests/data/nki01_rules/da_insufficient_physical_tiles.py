"""da.lifetime_tiles: a block tensor with 2 physical tiles whose 8 logical tiles must all be live at once."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.lifetime_tiles"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_direct_allocation_guide.rst 'Common Errors' 3 (Lifetime Conflicts)"
CODE = "E030"
STRICT = False
GOOD_WARNS = "block dimensions"

# nl.exp is itself rejected in an allocated kernel (ERR err_bias_tensor_must_be_specified_in_allocation),
# so both forms use nisa.activation with a directly allocated bias tile.


def inputs():
    return (np.random.default_rng(0).standard_normal((8, 128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((8, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t1 = nl.ndarray(
        (8, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,))
    )
    r = nl.ndarray(
        (8, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096, num_free_tiles=(2,))
    )
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=8192))
    bias[...] = 0.0
    for i in nl.affine_range(8):
        t1[i] = nl.load(a[i])  # <- blame
    for i in nl.affine_range(8):
        r[i] = nisa.activation(op=nl.exp, data=t1[i], bias=bias)
        nl.store(out[i], r[i])
    return out


@nki.jit
def good(a):
    out = nl.ndarray((8, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=8192))
    bias[...] = 0.0
    for j in nl.affine_range(4):
        t1 = nl.ndarray(
            (2, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,))
        )
        r = nl.ndarray(
            (2, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096, num_free_tiles=(2,))
        )
        for i in nl.affine_range(2):
            t1[i] = nl.load(a[j * 2 + i])
            r[i] = nisa.activation(op=nl.exp, data=t1[i], bias=bias)
            nl.store(out[j * 2 + i], r[i])
    return out


def reference(a):
    return np.exp(a)
