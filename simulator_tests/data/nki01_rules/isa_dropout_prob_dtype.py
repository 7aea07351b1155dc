"""isa.dropout_prob: for integer data, nisa.dropout's probability tile is fp32."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.dropout_prob"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py dropout"
CODE = "E009"
STRICT = False
GOOD_WARNS = "dropout"


def inputs():
    return (np.random.default_rng(0).integers(0, 100, (128, 64)).astype(np.int32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    prob = nisa.memset((128, 1), 0.5, dtype=nl.float16)
    r = nisa.dropout(nl.load(a), prob)  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    prob = nisa.memset((128, 1), 0.5, dtype=nl.float32)
    r = nisa.dropout(nl.load(a), prob)
    nl.store(out, r)
    return out
