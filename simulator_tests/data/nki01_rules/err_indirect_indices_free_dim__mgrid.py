"""err_indirect_indices_free_dim (second form; also the known-issues page): an indirect nl.load indexed with
nl.mgrid fields fails even on the partition axis; use nl.arange."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_indirect_indices_free_dim"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-indirect-indices-free-dim; "
    "general/nki/nki_known_issues.rst 'Indexing' (use nl.arange for indirect access)"
)
CODE = "E014"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 512)).astype(np.float32), (2 * np.arange(64)).astype(np.int32))


@nki.jit
def bad(data, idx):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:64, 0:512]
    idx_tile = nl.load(idx[nl.arange(64)[:, None]])
    t = nl.load(data[idx_tile[i_p, 0], i_f])  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(data, idx):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    idx_tile = nl.load(idx[i_p])
    t = nl.load(data[idx_tile[i_p, 0], i_f])
    nl.store(out, t)
    return out


def reference(data, idx):
    return data[idx]
