"""pm.predicate_truth_value (fourth form): `and` between two loop-index predicates in a value, then an `if` on the
result, as AWS's flash-attention backward does (`tile_required = tile_required and (...)`).  Python's `and`
tests the first predicate, which the tracer holds as an object that is always true, so the result is the second
predicate alone and the `if` predicates on it.  A warning by default, an error under strict; combine
predicates with `&` to get both."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.predicate_truth_value"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI'; spec corrections turn 4, "
    "item I (nki-samples 0898a77 src/nki_samples/reference/attention.py flash_attn_bwd)"
)
CODE = "E028"
STRICT = True


def inputs():
    return (np.random.default_rng(4).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(a[i])
        keep = i >= 0
        keep = keep and (i < 3)  # <- blame
        if keep:
            t[...] = nl.multiply(t, 3.0)
        nl.store(out[i], t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(a[i])
        if (i >= 0) & (i < 3):
            t[...] = nl.multiply(t, 3.0)
        nl.store(out[i], t)
    return out


def reference(a):
    return a * np.array([3, 3, 3, 1], np.float32)[:, None, None]
