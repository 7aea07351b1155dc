"""`x3[sel_tile[0, 0], :, :]` of a (ranks, rows, H) reshape: a one-element SBUF tile as the runtime index of the
first axis, slices on the others."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "vLLM-NKIPy ops/moe/nki fused_rank_slice (rank_slice_add_kernel, the neuronxcc version)"
NKI = "0.1"


def inputs():
    rng = np.random.default_rng(18)
    return (
        rng.standard_normal((8, 32)).astype(np.float32),
        rng.standard_normal((8, 32)).astype(np.float32),
        np.array([[3]], np.int32),
    )


@nki.jit
def kernel(x, y, sel):
    per = 2
    s = nl.load(sel)
    x3 = x.reshape((4, per, 32))
    y3 = y.reshape((4, per, 32))
    out = nl.ndarray((per, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    xs = nl.load(x3[s[0, 0], :, :])
    ys = nl.load(y3[s[0, 0], :, :])
    nisa.dma_copy(src=nisa.tensor_tensor(xs, ys, nl.add), dst=out)
    return out


def reference(x, y, sel):
    return (x + y)[6:8]
