"""accept: `psum += nisa.nc_matmul(...)` into one PSUM tile across nl.affine_range iterations is an
associative reduction, not an output dependency (the affine_range docstring's example 2)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.psum_matmul_accumulation"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py affine_range (example 2)"
CODE = None


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((512, 128)).astype(np.float32), rng.standard_normal((512, 256)).astype(np.float32))


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.zeros((128, 256), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(4):
        res += nisa.nc_matmul(nl.load(xT[k * 128 : (k + 1) * 128, :]), nl.load(y[k * 128 : (k + 1) * 128, :]))
    nl.store(out, nl.copy(res))
    return out


def reference(xT, y):
    return xT.T @ y
