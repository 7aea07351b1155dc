"""err_while_loop_requires_unconditional_entry (second form): a while loop whose first test is a flag tile computed
before the loop.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_while_loop_requires_unconditional_entry"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-while-loop-requires-unconditional-entry"
CODE = "E015"
STRICT = False


def inputs():
    return (np.full((1, 1), 5.0, np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    positive = nl.greater(t, 0.0)
    while positive:  # <- blame
        t = nl.subtract(t, 1.0)
        positive = nl.greater(t, 0.0)
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nl.minimum(t, 0.0))
    return out


def reference(a):
    return np.minimum(a, 0.0)
