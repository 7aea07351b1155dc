"""accept: `t[i, j, :, :] = nl.loop_reduce(...)` -- nl.loop_reduce assigned into a subscript computed from loop
indices, as AWS's flash attention backward does (dq_local_reduced)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.loop_reduce_subscript"
SOURCE = (
    "nki-samples@0898a77 src/nki_samples/reference/attention.py:1075 "
    "(flash_attn_bwd, `dq_local_reduced[...] = nl.loop_reduce(`)"
)
CODE = None
# flash_attn_bwd accumulates into a block-dimension tile: the deprecation warning (docs section 11 item 6)
GOOD_WARNS = "block dimensions"


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 4, 128, 128)).astype(np.float32),)


@nki.jit
def good(a):
    out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((2, 2, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        for k in nl.affine_range(4):
            t = nl.load(a[i, k])
            acc[i, 0, :, :] = nl.loop_reduce(t, op=np.add, loop_indices=(k,), dtype=nl.float32)
        nl.store(out[i], acc[i, 0, :, :])
    return out


def reference(a):
    return a.sum(axis=1)
