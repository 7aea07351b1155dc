"""ki.bn_stats_reduce_mask (second form): bn_stats over loop tiles masked on the free (reduce) axis for the ragged
tail."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.bn_stats_reduce_mask"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst (bn_stats does not support mask on the reduce dimension)"
)
CODE = "E011"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 400)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((2, 128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(256)[None, :]
    for k in nl.affine_range(2):
        t = nl.load(a[i_p, k * 256 + i_f], mask=k * 256 + i_f < 400)
        stats = nisa.bn_stats(t, mask=k * 256 + i_f < 400)  # <- blame
        nl.store(out[k], stats)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((2, 128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    head = nl.load(a[:, 0:256])
    tail = nl.load(a[:, 256:400])
    nl.store(out[0], nisa.bn_stats(head))
    nl.store(out[1], nisa.bn_stats(tail))
    return out
