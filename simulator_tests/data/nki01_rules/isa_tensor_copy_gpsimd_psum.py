"""isa.gpsimd_psum: GpSimd cannot access PSUM (tensor_copy from PSUM runs on Vector or Scalar)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.gpsimd_psum"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_copy"
CODE = "E007"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_matmul(nl.load(xT), nl.load(y))
    r = nisa.tensor_copy(p, engine=nisa.gpsimd_engine)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_matmul(nl.load(xT), nl.load(y))
    r = nisa.tensor_copy(p, engine=nisa.vector_engine)
    nl.store(out, r)
    return out


def reference(xT, y):
    return xT.T @ y
