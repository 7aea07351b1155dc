"""err_while_loop_requires_unconditional_entry: a `while` whose condition is a runtime (tensor) value checked
before the first iteration.  The page's do-while fix relies on a tensor-to-scalar cast this interpreter does
not document, so the fixed twin here unrolls the bounded loop instead."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_while_loop_requires_unconditional_entry"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-while-loop-requires-unconditional-entry"
CODE = "E015"
STRICT = False


def inputs():
    return (np.full((1, 1), 7.0, np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.load(a)
    while nl.less(a_tile, 10.0):  # <- blame
        a_tile = nl.add(a_tile, 1.0)
    nl.store(out, a_tile)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.load(a)
    nl.store(out, nl.maximum(a_tile, 10.0))
    return out


def reference(a):
    return np.maximum(a, 10.0)
