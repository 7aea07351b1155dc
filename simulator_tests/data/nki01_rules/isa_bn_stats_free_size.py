"""isa.bn_stats_fmax: bn_stats reads at most 512 elements per partition (nl.tile_size.bn_stats_fmax)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.bn_stats_fmax"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py bn_stats"
CODE = "E020"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1024)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nisa.bn_stats(nl.load(a))  # <- blame
    nl.store(out, nisa.bn_aggr(stats))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
    t = nl.load(a)
    for j in nl.affine_range(2):
        stats[:, j * 6 : (j + 1) * 6] = nisa.bn_stats(t[:, j * 512 : (j + 1) * 512])
    nl.store(out, nisa.bn_aggr(stats))
    return out


def reference(a):
    return np.stack([a.mean(axis=1), a.var(axis=1)], axis=1)
