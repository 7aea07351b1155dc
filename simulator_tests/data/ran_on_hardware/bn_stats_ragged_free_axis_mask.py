"""Mean and variance of 600-wide rows with bn_stats over 512-wide chunks, the last chunk masked on its free axis
(`j * 512 + i_f < 600`), then bn_aggr."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "the SDK's own 2.26 layernorm example (general/nki/examples/layernorm, nki_layernorm_kernel_v2)"
NKI = "0.1"
WARNS = {"ki.bn_stats_reduce_mask"}
F = 600


def inputs():
    return (np.random.default_rng(22).standard_normal((128, F)).astype(np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    i_s = nl.arange(6)[None, :]
    t = nl.load(x)
    stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(2):
        stats[i_p, j * 6 + i_s] = nisa.bn_stats(t[i_p, j * 512 + i_f], mask=(j * 512 + i_f < F), dtype=nl.float32)
    nl.store(out, nisa.bn_aggr(stats))
    return out


def reference(x):
    return np.stack([x.mean(axis=1), x.var(axis=1)], axis=1)
