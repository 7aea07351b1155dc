"""ki.mask_and (second form): Python 'and' between two arange predicates in an nl.load mask."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.mask_and"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Masks conjunction'"
CODE = "E024"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(256)[None, :]
    t = nl.load(a[i_p, i_f], mask=(i_p < 32) and (i_f < 100))  # <- blame
    nl.store(out[i_p, i_f], t, mask=(i_p < 32) & (i_f < 100))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(256)[None, :]
    t = nl.load(a[i_p, i_f], mask=(i_p < 32) & (i_f < 100))
    nl.store(out[i_p, i_f], t, mask=(i_p < 32) & (i_f < 100))
    return out


def reference(a):
    r = np.zeros_like(a)
    r[:32, :100] = a[:32, :100]
    return r
