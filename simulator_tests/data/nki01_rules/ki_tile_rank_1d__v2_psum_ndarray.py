"""ki.tile_rank_1d (second form): a 1-D tile created in PSUM with nl.ndarray."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.tile_rank_1d"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Indexing' (tiles on SBUF/PSUM need at least 2 "
    "dimensions)"
)
CODE = "E010"
STRICT = True


def inputs():
    return (np.zeros((128, 1), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128,), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, nl.load(a))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.psum)
    acc[...] = nisa.tensor_copy(nl.load(a))
    nl.store(out, acc)
    return out


def reference(a):
    return a
