"""ki.mask_and: masks are combined with &, not `and`.  The SDK's own nc_match_replace8 example passes
`mask=(a and b)` and its golden value is Python's result (b alone), so: a warning by default, strict errors."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.mask_and"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Masks conjunction'; "
    "general/nki/test/test_nki_isa_nc_match_replace8.py (uses `and`)"
)
CODE = "E024"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    t = nl.load(a)
    nl.store(out, nl.exp(t), mask=(i_p < 64) and (i_f < 256))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    t = nl.load(a)
    nl.store(out, nl.exp(t), mask=(i_p < 64) & (i_f < 256))
    return out


def reference(a):
    r = np.zeros_like(a)
    r[:64, :256] = np.exp(a[:64, :256])
    return r
