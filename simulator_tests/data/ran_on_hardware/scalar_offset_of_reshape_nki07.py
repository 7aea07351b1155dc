"""`.ap(pattern, offset=0, scalar_offset=tile, indirect_dim=0)` on a (ranks, rows, H) reshape of a (B, H) input:
the runtime offset counts whole ranks of the reshaped view."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "aws-neuron/nkipy rank_slice_add_kernel (NKI 0.7: scalar_offset DMA gather by rank)"
NKI = "0.7"


def inputs():
    rng = np.random.default_rng(19)
    return (
        rng.standard_normal((8, 32)).astype(np.float32),
        rng.standard_normal((8, 32)).astype(np.float32),
        np.array([[1]], np.int32),
    )


@nki.jit
def kernel(x, y, sel):
    per, H = 2, 32
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s[0:1, 0:1], src=sel[0:1, 0:1])
    x3 = x.reshape((4, per, H))
    y3 = y.reshape((4, per, H))
    out = nl.ndarray((per, H), dtype=x.dtype, buffer=nl.shared_hbm)
    xs = nl.ndarray((per, H), dtype=x.dtype, buffer=nl.sbuf)
    ys = nl.ndarray((per, H), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x3.ap(pattern=[[H, per], [1, H]], offset=0, scalar_offset=s, indirect_dim=0))
    nisa.dma_copy(dst=ys, src=y3.ap(pattern=[[H, per], [1, H]], offset=0, scalar_offset=s, indirect_dim=0))
    r = nl.ndarray((per, H), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=r, data1=xs, data2=ys, op=nl.add)
    nisa.dma_copy(dst=out, src=r)
    return out


def reference(x, y, sel):
    return (x + y)[2:4]
