"""pm.tc3: the stationary operand of a matmul has at most 128 columns (gemm_stationary_fmax), the moving one
at most 512 (gemm_moving_fmax)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.tc3_matmul_fmax"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Tile size considerations' [TC#3]"
CODE = "E003"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((128, 512)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(nl.load(xT), nl.load(y))  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(2):
        r = nisa.nc_matmul(nl.load(xT[:, m * 128 : (m + 1) * 128]), nl.load(y))
        nl.store(out[m * 128 : (m + 1) * 128, :], nl.copy(r))
    return out


def reference(xT, y):
    return xT.T @ y
