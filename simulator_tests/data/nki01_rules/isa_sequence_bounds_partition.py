"""isa.sequence_bounds_partition: sequence_bounds' segment ids have exactly one partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.sequence_bounds_partition"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py sequence_bounds"
CODE = "E011"
STRICT = False


def inputs():
    return (np.array([[1, 1, 2, 2, 2, 0, 3, 3]] * 2, np.float32),)


@nki.jit
def bad(seg):
    out = nl.ndarray((2, 2, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    b = nisa.sequence_bounds(segment_ids=nl.load(seg), dtype=nl.float32)  # <- blame
    nl.store(out, b)
    return out


@nki.jit
def good(seg):
    out = nl.ndarray((1, 2, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    b = nisa.sequence_bounds(segment_ids=nl.load(seg[0:1, :]), dtype=nl.float32)
    nl.store(out, b)
    return out
