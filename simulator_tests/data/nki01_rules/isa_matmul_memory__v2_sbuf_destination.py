"""isa.matmul_memory (second form): an nc_matmul result assigned into an SBUF tile (TensorE writes PSUM)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.matmul_memory"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_matmul (must write outputs to PSUM); "
    "general/nki/api/nki.errors.rst#err-unsupported-memory"
)
CODE = "E007"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.sbuf)
    res[...] = nisa.nc_matmul(nl.load(xT), nl.load(y))  # <- blame
    nl.store(out, res)
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.psum)
    res[...] = nisa.nc_matmul(nl.load(xT), nl.load(y))
    nl.store(out, nl.copy(res))
    return out


def reference(xT, y):
    return xT.T @ y
