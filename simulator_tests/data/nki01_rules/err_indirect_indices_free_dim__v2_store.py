"""err_indirect_indices_free_dim (second form): nl.store with a runtime index tile on the destination's free axis."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_indirect_indices_free_dim"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-indirect-indices-free-dim; "
    "general/nki/api/nki/language/__init__.py store (indirect access)"
)
CODE = "E014"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((64, 64)).astype(np.float32), (2 * np.arange(64)).astype(np.int32))


@nki.jit
def bad(src, idx):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    idx_row = nl.load(idx.reshape((1, 64)))
    t = nl.load(src)
    nl.store(out[i_p, idx_row[0, i_f]], value=t)  # <- blame
    return out


@nki.jit
def good(src, idx):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out, value=0.0)
    idx_tile = nl.load(idx[i_p])
    t = nl.load(src)
    nl.store(out[idx_tile[i_p, 0], i_f], value=t)
    return out


def reference(src, idx):
    r = np.zeros((128, 128), np.float32)
    r[idx, :64] = src
    return r
