"""isa.matmul_memory (second form): nisa.nc_matmul with its stationary operand still in HBM."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.matmul_memory"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_matmul (stationary and moving must be SBUF "
    "tiles)"
)
CODE = "E007"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(xT, nl.load(y))  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(nl.load(xT), nl.load(y))
    nl.store(out, nl.copy(r))
    return out


def reference(xT, y):
    return xT.T @ y
