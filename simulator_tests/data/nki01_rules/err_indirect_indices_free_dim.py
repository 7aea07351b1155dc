"""err_indirect_indices_free_dim: a runtime index tile may index the partition (or block) axis of an
nl.load/nl.store, not a free axis."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_indirect_indices_free_dim"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-indirect-indices-free-dim"
CODE = "E014"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), (2 * np.arange(64)).astype(np.int32))


@nki.jit
def bad(data, idx):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    idx_row = nl.load(idx.reshape((1, 64)))
    t = nl.load(data[i_p, idx_row[0, i_f]])  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(data, idx):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(128)[None, :]
    idx_tile = nl.load(idx[i_p])
    t = nl.load(data[idx_tile[i_p, 0], i_f])
    nl.store(out, t)
    return out


def reference(data, idx):
    return data[idx]
