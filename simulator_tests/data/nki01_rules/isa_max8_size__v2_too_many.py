"""isa.max8_size (second form): max8 over more than 16384 elements per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.max8_size"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py max8 (between 8 and 16,384 elements per partition)"
)
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 16400)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nisa.max8(src=nl.load(a))  # <- blame
    nl.store(out, m)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nisa.max8(src=nl.load(a[:, 0:16384]))
    nl.store(out, m)
    return out


def reference(a):
    return -np.sort(-a[:, :16384], axis=1)[:, :8]
