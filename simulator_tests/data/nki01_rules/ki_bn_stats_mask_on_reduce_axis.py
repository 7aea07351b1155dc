"""ki.bn_stats_reduce_mask: nisa.bn_stats masked on its reduction (free) axis.  The known-issues page says it is not
supported, but the SDK's own 2.26 layernorm example does it for a ragged last chunk (spec corrections turn 4, item
J): a warning by default (the statistics of the masked-in elements), an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.bn_stats_reduce_mask"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst (bn_stats does not support mask on the reduce "
    "dimension); "
    "general/nki/examples/layernorm/layernorm_nki_kernel.py (nki_layernorm_kernel_v2 does it)"
)
CODE = "E011"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    t = nl.load(a)
    stats = nisa.bn_stats(t[i_p, i_f], mask=(i_f < 256))  # <- blame
    nl.store(out, stats)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    stats = nisa.bn_stats(t[:, 0:256])
    nl.store(out, stats)
    return out
