"""accept: a PSUM tensor with block dimensions whose logical size exceeds the 16 KiB of PSUM per partition; the
compiler places its blocks over the banks as they are used (AWS's blockwise MoE kernel declares
`nl.zeros((H // 512, nl.par_dim(128), 512), buffer=nl.psum)`; psum.alloc: the block dimension does not give the
number of physical tiles)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.psum_blocks_placed"
SOURCE = (
    "nki-samples@0898a77 contributed/neuron-team-kernels/blockwise_mm.py:805 (`down_proj`); "
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/compiler/psum.py alloc"
)
CODE = None
GOOD_WARNS = "block dimensions"


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 5120)).astype(np.float32))


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 5120), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.zeros((10, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum, lazy_initialization=True)
    x_sb = nl.load(xT)
    for j in nl.affine_range(10):
        res[j] += nisa.nc_matmul(x_sb, nl.load(y[:, j * 512 : (j + 1) * 512]))
        nl.store(out[:, j * 512 : (j + 1) * 512], nl.copy(res[j]))
    return out


def reference(xT, y):
    return xT.T @ y
