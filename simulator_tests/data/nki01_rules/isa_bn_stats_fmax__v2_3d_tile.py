"""isa.bn_stats_fmax (second form): bn_stats of a 3-D tile holding 1024 elements per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.bn_stats_fmax"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py bn_stats (at most 512 elements per partition)"
CODE = "E020"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 2, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((2, 128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nisa.bn_stats(nl.load(a))  # <- blame
    nl.store(out[0], stats)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((2, 128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    for k in nl.affine_range(2):
        nl.store(out[k], nisa.bn_stats(t[:, k, :]))
    return out
