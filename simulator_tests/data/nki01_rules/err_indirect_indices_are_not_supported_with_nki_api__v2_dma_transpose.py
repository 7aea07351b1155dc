"""err_indirect_indices_are_not_supported_with_nki_api (second form): nisa.dma_transpose of a source indexed through a
runtime index tile.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_indirect_indices_are_not_supported_with_nki_api"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-indirect-indices-are-not-supported-with-nki-api"
CODE = "E014"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), (2 * np.arange(64)).astype(np.int32))


@nki.jit
def bad(data, idx):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    idx_tile = nl.load(idx[i_p])
    t = nisa.dma_transpose(data[idx_tile[i_p, 0], i_f])  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(data, idx):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    idx_tile = nl.load(idx[i_p])
    g = nl.load(data[idx_tile[i_p, 0], i_f])
    t = nisa.dma_transpose(g)
    nl.store(out, t)
    return out


def reference(data, idx):
    return data[idx].T
