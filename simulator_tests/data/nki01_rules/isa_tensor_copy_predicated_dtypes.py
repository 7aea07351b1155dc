"""isa.copy_predicated_dtypes: tensor_copy_predicated's predicate is uint8/uint16/uint32 and src, dst share
a dtype."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.copy_predicated_dtypes"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_copy_predicated"
CODE = "E009"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), (rng.random((128, 64)) > 0.5).astype(np.float32))


@nki.jit
def bad(a, p):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    dst = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy_predicated(src=nl.load(a), dst=dst, predicate=nl.load(p))  # <- blame
    nl.store(out, dst)
    return out


@nki.jit
def good(a, p):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    dst = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy_predicated(src=nl.load(a), dst=dst, predicate=nl.load(p, dtype=nl.uint8))
    nl.store(out, dst)
    return out


def reference(a, p):
    return np.where(p != 0, a, 0.0)
