"""accept: Python `range` in a plain helper function called from the kernel is unrolled with ints (nki-samples'
NKI-917 note), so list indexing by its variable works."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.helper_range_ints"
SOURCE = (
    "nki-samples@0898a77 src/nki_samples/reference/rmsnorm_quant/rmsnorm_quant.py (NKI-917: range() loops "
    "in functions beyond the top level of the kernel are unrolled)"
)
CODE = None


def inputs():
    return (np.random.default_rng(0).standard_normal((3, 128, 64)).astype(np.float32),)


def _scaled_copies(a, out, factors):
    for i in range(len(factors)):
        nl.store(out[i], nl.multiply(nl.load(a[i]), factors[i]))


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    _scaled_copies(a, out, [1.0, 2.0, 3.0])
    return out


def reference(a):
    return a * np.array([1.0, 2.0, 3.0], np.float32)[:, None, None]
