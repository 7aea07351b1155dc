"""ki.tile_rank: a 0-D SBUF tile has no partition axis at all (an SBUF/PSUM tile needs a partition axis and a free
axis; a 1-D tile is only warned, see ki_tile_rank_1d)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.tile_rank"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Indexing' (at least 2 dimensions)"
CODE = "E010"
STRICT = False


def inputs():
    return (np.ones((128, 1), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.zeros((), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    nl.store(out, nl.load(a))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(out, nl.load(a))
    return out


def reference(a):
    return a
