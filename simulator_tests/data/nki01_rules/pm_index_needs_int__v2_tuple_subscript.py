"""pm.index_needs_int (second form): a tuple subscripted with a symbolic loop index."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index); "
    "docs/nki-0.1-rules.md section 9"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    starts = (0, 64)
    for i in nl.affine_range(2):
        s = starts[i]  # <- blame
        nl.store(out[:, s : s + 64], nl.load(a[:, s : s + 64]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(out[:, nl.ds(i * 64, 64)], nl.load(a[:, nl.ds(i * 64, 64)]))
    return out


def reference(a):
    return a
