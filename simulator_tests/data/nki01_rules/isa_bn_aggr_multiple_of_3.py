"""isa.bn_aggr_input: bn_aggr's input holds (count, mean, variance) triples: a multiple of 3 elements per
partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.bn_aggr_input"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py bn_aggr"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nisa.bn_stats(nl.load(a))
    mv = nisa.bn_aggr(stats[:, 0:4])  # <- blame
    nl.store(out, mv)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nisa.bn_stats(nl.load(a))
    mv = nisa.bn_aggr(stats)
    nl.store(out, mv)
    return out


def reference(a):
    return np.stack([a.mean(axis=1), a.var(axis=1)], axis=1)
