"""pm.tc3_matmul_fmax (second form): nisa.nc_matmul with a moving tile wider than 512."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.tc3_matmul_fmax"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_matmul (moving free size <= 512); "
    "general/nki/programming_model.rst (tile size constraints)"
)
CODE = "E003"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 1024)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(nl.load(xT), nl.load(y))  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(xT)
    for n in nl.affine_range(2):
        r = nisa.nc_matmul(st, nl.load(y[:, n * 512 : (n + 1) * 512]))
        nl.store(out[:, n * 512 : (n + 1) * 512], nl.copy(r))
    return out


def reference(xT, y):
    return xT.T @ y
