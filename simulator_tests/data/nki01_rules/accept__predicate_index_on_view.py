"""accept: "operand masking" -- a predicate used as the index of an arange view of a matmul operand
(`masked[i_p, i_img][i_img < n]`), as AWS's conv kernel does."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.operand_mask_index"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.api.shared.rst 'NKI API Masking' (operand masking); "
    "nki-samples@0898a77 contributed/neuron-team-kernels/conv.py:1328"
)
CODE = None


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32))


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.load(xT)
    i_p = nl.arange(128)[:, None]
    i_m = nl.arange(128)[None, :]
    r = nisa.nc_matmul(x_sb[i_p, i_m][i_m < 128], nl.load(y))
    nl.store(out, nl.copy(r))
    return out


def reference(xT, y):
    return xT.T @ y
