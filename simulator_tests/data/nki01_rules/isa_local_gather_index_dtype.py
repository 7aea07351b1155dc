"""isa.local_gather_index: local_gather's indices are uint16."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.local_gather_index"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py local_gather"
CODE = "E009"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((16, 64)).astype(np.float32), rng.integers(0, 64, (16, 4)).astype(np.int32))


@nki.jit
def bad(src, idx):
    out = nl.ndarray((16, 4, 16, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nisa.local_gather(nl.load(src), nl.load(idx))  # <- blame
    nl.store(out, g)
    return out


@nki.jit
def good(src, idx):
    out = nl.ndarray((16, 4, 16, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nisa.local_gather(nl.load(src), nl.load(idx, dtype=nl.uint16))
    nl.store(out, g)
    return out
