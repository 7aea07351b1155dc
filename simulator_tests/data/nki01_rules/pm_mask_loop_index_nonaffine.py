"""pm.mask_loop_index_nonaffine: a store mask over nl.arange indices with a `//` of an affine_range index, as a
CS149 solution that ran on trn2 writes one loop over (row tile, column half) pairs.  err_unsupported_expression_in_mask
shows `i % 4` of a loop index as a whole mask failing (still an error here: err_unsupported_expression_in_mask);
a loop-index term next to aranges is a constant in each iteration once the backend unrolls the loop.  A warning by
default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.mask_loop_index_nonaffine"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-expression-in-mask; spec corrections "
    "turn 4, item H (a CS149 solution that ran on trn2)"
)
CODE = "E015"
STRICT = True
N = 300


def inputs():
    return (np.random.default_rng(5).standard_normal((N, 8)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((N, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(4)[None, :]
    for t in nl.affine_range(2 * ((N + 127) // 128)):
        rows = (t // 2) * 128 + i_p
        tile = nl.load(a[rows, (t % 2) * 4 + i_f], mask=(rows < N))  # <- blame
        nl.store(out[rows, (t % 2) * 4 + i_f], tile, mask=(rows < N))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((N, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(4)[None, :]
    for r in nl.affine_range((N + 127) // 128):
        for h in nl.affine_range(2):
            tile = nl.load(a[r * 128 + i_p, h * 4 + i_f], mask=(r * 128 + i_p < N))
            nl.store(out[r * 128 + i_p, h * 4 + i_f], tile, mask=(r * 128 + i_p < N))
    return out


def reference(a):
    return a
