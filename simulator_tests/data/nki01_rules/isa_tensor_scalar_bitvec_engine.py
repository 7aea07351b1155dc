"""isa.bitvec_vector: bitvec tensor_scalar runs on the Vector engine only."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.bitvec_vector"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_scalar; "
    "general/nki/api/nki.api.shared.rst tbl-aluop"
)
CODE = "E025"
STRICT = False


def inputs():
    return (np.random.default_rng(0).integers(0, 100, (128, 64)).astype(np.int32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    r = nisa.tensor_scalar(nl.load(a), np.bitwise_and, 15, dtype=nl.int32, engine=nisa.gpsimd_engine)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    r = nisa.tensor_scalar(nl.load(a), np.bitwise_and, 15, dtype=nl.int32, engine=nisa.vector_engine)
    nl.store(out, r)
    return out


def reference(a):
    return a & 15
