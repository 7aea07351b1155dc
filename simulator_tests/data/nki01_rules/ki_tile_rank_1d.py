"""ki.tile_rank_1d: a 1-D SBUF tile.  The known-issues page says an SBUF/PSUM tile needs at least two axes and
that users "may" get "Insufficient rank" on a 1-D one; 2024 CS149 solutions that ran on hardware declared (128,)
SBUF tiles.  So: a warning by default (the interpreter makes it the (128, 1) tile), an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.tile_rank_1d"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Indexing' (at least 2 dimensions; users 'may' get "
    "'Insufficient rank'); spec corrections turn 4, item J"
)
CODE = "E010"
STRICT = True


def inputs():
    return (np.zeros((128, 1), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.zeros((128,), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    nl.store(out, nl.load(a))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(out, buf)
    return out


def reference(a):
    return np.zeros((128, 1), np.float32)
