"""err_size_of_dimension_exceed_arch_limit (second form): nisa.nc_transpose on the Tensor Engine of a tile wider than
128.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_size_of_dimension_exceed_arch_limit"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-size-of-dimension-exceed-arch-limit; "
    "general/nki/api/nki/isa/__init__.py nc_transpose (Tensor Engine: (128, 128) or smaller)"
)
CODE = "E020"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((256, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.nc_transpose(t, engine=nisa.tensor_engine)  # <- blame
    nl.store(out[0:128, :], nl.copy(r[0:128, :]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((256, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    for k in nl.affine_range(2):
        t = nl.load(a[:, k * 128 : (k + 1) * 128])
        r = nisa.nc_transpose(t, engine=nisa.tensor_engine)
        nl.store(out[k * 128 : (k + 1) * 128, :], nl.copy(r))
    return out


def reference(a):
    return a.T
