"""isa.select_reduce_predicate: select_reduce's predicate is an integer tile (int8/uint8/int16/uint16)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.select_reduce_predicate"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py select_reduce"
CODE = "E009"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), (rng.random((128, 64)) > 0.5).astype(np.float32))


@nki.jit
def bad(a, p):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    dst = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=dst, predicate=nl.load(p), on_true=nl.load(a), on_false=0.0)  # <- blame
    nl.store(out, dst)
    return out


@nki.jit
def good(a, p):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    dst = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=dst, predicate=nl.load(p, dtype=nl.uint8), on_true=nl.load(a), on_false=0.0)
    nl.store(out, dst)
    return out


def reference(a, p):
    return np.where(p != 0, a, 0.0)
