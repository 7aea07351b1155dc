"""isa.match_replace8_vals: nc_match_replace8's vals hold exactly 8 elements per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.match_replace8_vals"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_match_replace8"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).permutation(128 * 64).reshape(128, 64).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    m = nisa.max8(src=t)
    r = nisa.nc_match_replace8(data=t, vals=m[:, 0:4], imm=-1.0)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    m = nisa.max8(src=t)
    r = nisa.nc_match_replace8(data=t, vals=m, imm=-1.0)
    nl.store(out, r)
    return out


def reference(a):
    r = a.copy()
    top = np.argsort(-a, axis=1)[:, :8]
    np.put_along_axis(r, top, -1.0, axis=1)
    return r
