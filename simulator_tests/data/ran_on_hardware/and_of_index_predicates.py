"""`keep = keep and (other predicate)` of affine_range indices, then `if keep:` -- as traced, the `and` is its
second predicate; the tiles it skips on hardware are also masked inside, so the result is the same."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "aws-neuron/nki-samples src/nki_samples/reference/attention.py (flash_attn_bwd: `tile_required and ...`)"
NKI = "0.1"
WARNS = {"pm.predicate_truth_value"}


def inputs():
    return (np.random.default_rng(13).standard_normal((4, 128, 32)).astype(np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for q in nl.affine_range(4):
        t = nl.load(x[q])
        needed = q >= 1
        needed = needed and (q <= 3)
        res = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        res[...] = nl.multiply(t, 0.0)
        if needed:
            # the work is masked to what the first predicate meant (query tiles after the first)
            res[...] = nl.multiply(t, 2.0, mask=(q >= 1))
        nl.store(out[q], res)
    return out


def reference(x):
    r = 2.0 * x
    r[0] = 0.0
    return r
