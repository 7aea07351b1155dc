"""LNC=2, 7 rows split 4 + 3: each core loads its rows one DMA per row, then creates the shared output and writes
its rows into it.  Core 1 has fewer DMAs to issue, so it reaches the output's creation first; both cores must
still write the one shared tensor."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "aws-neuron/nki-library core/max/cascaded_max.py (LNC=2, B x S not a multiple of 2: 25 and 127 rows)"
NKI = "0.7"
GRID = 2


def inputs():
    return (np.random.default_rng(31).standard_normal((7, 32)).astype(np.float32),)


@nki.jit
def kernel(x):
    core = nl.program_id(0)
    per = 4
    mine = min(per, 7 - core * per)
    t = nl.ndarray((per, 32), dtype=x.dtype, buffer=nl.sbuf)
    for r in nl.affine_range(mine):
        nisa.dma_copy(dst=t[r : r + 1, :], src=x[core * per + r : core * per + r + 1, :])
    m = nl.ndarray((per, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m[0:mine, :], op=nl.maximum, data=t[0:mine, :], axis=1)
    out = nl.ndarray((7, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[core * per : core * per + mine, :], src=m[0:mine, :])
    return out


def reference(x):
    return x.max(axis=1, keepdims=True)
