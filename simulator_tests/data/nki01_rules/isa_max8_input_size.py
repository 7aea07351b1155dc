"""isa.max8_size: max8 reads between 8 and 16384 elements per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.max8_size"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py max8"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nisa.max8(src=nl.load(a[:, 0:4]))  # <- blame
    nl.store(out, m)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nisa.max8(src=nl.load(a))
    nl.store(out, m)
    return out


def reference(a):
    return -np.sort(-a, axis=1)[:, :8]
