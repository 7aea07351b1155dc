"""accept: AWS's layernorm tutorial (v2) loads a ragged row tile under a partition mask and calls bn_stats with
a mask over the free (reduce) axis that holds for every element (`j * 512 + i_f < hidden`, hidden a multiple of
512): the mask restricts nothing, and the masked-out rows of the tile are never read by a masked consumer."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.bn_stats_trivial_mask"
SOURCE = "nki-samples@0898a77 src/nki_samples/tutorials/layernorm/layernorm_nki_kernel.py nki_layernorm_kernel_v2"
CODE = None


def inputs():
    return (np.random.default_rng(0).standard_normal((100, 1024)).astype(np.float32),)


@nki.jit
def good(a):
    out = nl.ndarray((100, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(1024)[None, :]
    i_f_bn = nl.arange(512)[None, :]
    i_f_stats = nl.arange(6)[None, :]
    t = nl.load(a[i_p, i_f], mask=(i_p < 100))
    stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(2):
        stats[i_p, j * 6 + i_f_stats] = nisa.bn_stats(t[i_p, j * 512 + i_f_bn], mask=(j * 512 + i_f_bn < 1024))
    mv = nisa.bn_aggr(stats[i_p, nl.arange(12)[None, :]])
    nl.store(out[i_p, nl.arange(2)[None, :]], mv, mask=(i_p < 100))
    return out


def reference(a):
    return np.stack([a.mean(axis=1), a.var(axis=1)], axis=1)
