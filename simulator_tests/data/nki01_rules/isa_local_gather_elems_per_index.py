"""isa.local_gather_elems: local_gather's num_elem_per_idx is 1, 2, 4, 8, 16 or 32."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.local_gather_elems"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py local_gather"
CODE = "E011"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((16, 64)).astype(np.float32), rng.integers(0, 16, (16, 2)).astype(np.uint16))


@nki.jit
def bad(src, idx):
    out = nl.ndarray((16, 2, 16, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nisa.local_gather(nl.load(src), nl.load(idx), num_elem_per_idx=3)  # <- blame
    nl.store(out, g)
    return out


@nki.jit
def good(src, idx):
    out = nl.ndarray((16, 2, 16, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nisa.local_gather(nl.load(src), nl.load(idx), num_elem_per_idx=4)
    nl.store(out, g)
    return out
