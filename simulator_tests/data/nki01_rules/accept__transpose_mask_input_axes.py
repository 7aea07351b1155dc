"""accept: nisa.nc_transpose with a mask= built from the aranges that index its *input* (B, N) while the result
is (N, B) -- AWS's neuron-team transpose and conv kernels mask their transposes this way."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.transpose_input_mask"
SOURCE = (
    "nki-samples@0898a77 contributed/neuron-team-kernels/transpose.py:73; contributed/neuron-team-kernels/conv.py:286"
)
CODE = None


def inputs():
    return (np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32),)


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.arange(64)[:, None]
    j = nl.arange(128)[None, :]
    mask = (i < 64) & (j < 100)
    local = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
    local[i, j] = nl.load(a[i, j], mask=mask)
    p = nl.arange(128)[:, None]
    q = nl.arange(64)[None, :]
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[p, q] = nisa.nc_transpose(local[i, j], mask=mask)
    nl.store(out, 0.0)
    nl.store(out[p, q], t[p, q], mask=(q < 64) & (p < 100))
    return out


def reference(a):
    r = a.T.copy()
    r[100:] = 0.0
    return r
