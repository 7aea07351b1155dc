"""isa.find_index8_vals: nc_find_index8's vals hold exactly 8 elements per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.find_index8_vals"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_find_index8"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).permutation(128 * 64).reshape(128, 64).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 4), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(a)
    m = nisa.max8(src=t)
    idx = nisa.nc_find_index8(data=t, vals=m[:, 0:4])  # <- blame
    nl.store(out, idx)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(a)
    m = nisa.max8(src=t)
    idx = nisa.nc_find_index8(data=t, vals=m)
    nl.store(out, idx)
    return out


def reference(a):
    return np.argsort(-a, axis=1)[:, :8].astype(np.uint32)
