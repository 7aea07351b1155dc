"""ki.invert_bool (second form): nl.invert of the bool tile a comparison returns by default."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.invert_bool"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Execution' (nl.invert with bool input; use int8)"
CODE = "E024"
STRICT = True


def inputs():
    return (np.random.default_rng(0).random((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.int8, buffer=nl.shared_hbm)
    below = nl.less(nl.load(a), 0.5)
    nl.store(out, nl.invert(below, dtype=nl.int8))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.int8, buffer=nl.shared_hbm)
    below = nl.less(nl.load(a), 0.5, dtype=nl.int8)
    nl.store(out, nl.bitwise_and(nl.invert(below), 1))
    return out


def reference(a):
    return (a >= 0.5).astype(np.int8)
