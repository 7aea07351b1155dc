"""da.mod_alloc_tiles: mod_alloc's num_free_tiles has one entry per block dimension (or is empty)."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.mod_alloc_tiles"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/compiler/sbuf.py mod_alloc (num_par_tiles, num_free_tiles)"
CODE = "E030"
STRICT = False
GOOD_WARNS = "block dimensions"


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(  # <- blame
        (4, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2, 2))
    )
    for i in nl.affine_range(4):
        t[i] = nl.load(a[i])
        nl.store(out[i], t[i])
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(
        (4, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,))
    )
    for i in nl.affine_range(4):
        t[i] = nl.load(a[i])
        nl.store(out[i], t[i])
    return out


def reference(a):
    return a
