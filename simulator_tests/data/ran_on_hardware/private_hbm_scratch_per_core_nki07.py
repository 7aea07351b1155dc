"""Each core of an LNC=2 launch reshapes its half of the rows through a `private_hbm` scratch tensor (a DMA
out of SBUF and back in with a different shape), both cores at once: private HBM is each core's own."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "aws-neuron/nki-library core/topk/rotational_topk_utils.py reshape_with_dma (LNC=2 rotational top-k)"
NKI = "0.7"
GRID = 2


def inputs():
    return (np.random.default_rng(29).standard_normal((8, 16)).astype(np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray((4, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    core = nl.program_id(0)
    rows = x[core * 4 : core * 4 + 4, :]
    t = nl.ndarray((4, 16), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=rows)
    scratch = nl.ndarray((4, 16), dtype=x.dtype, buffer=nl.private_hbm)
    nisa.dma_copy(dst=scratch, src=t)
    folded = scratch.reshape((2, 32))
    u = nl.ndarray((2, 32), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=folded)
    nisa.dma_copy(dst=out[core * 2 : core * 2 + 2, :], src=u)
    return out


def reference(x):
    return x.reshape(4, 32)
