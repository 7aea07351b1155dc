"""ki.invert_bool: nl.invert (bitwise_not) on a bool tile gives wrong results on hardware; use int8.  Code
that runs but computes garbage on the device: a warning by default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.invert_bool"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Execution' (nl.invert with bool input)"
CODE = "E024"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.shared_hbm)
    m = nl.greater(nl.load(a), 0.0, dtype=nl.bool_)
    nl.store(out, nl.invert(m))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.shared_hbm)
    m = nl.greater(nl.load(a), 0.0, dtype=nl.int8)
    nl.store(out, nl.logical_not(m, dtype=nl.int8))
    return out


def reference(a):
    return (a <= 0).astype(np.uint8)
