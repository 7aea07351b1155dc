"""ki.two_indices (second form): an nisa op reading an [N, 1] tile through one index."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.two_indices"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Indexing' ([N, 1] buffers need both indices)"
CODE = "E014"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.load(a)
    r = nisa.activation(op=nl.exp, data=buf[0:64])  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.load(a)
    r = nisa.activation(op=nl.exp, data=buf[0:64, 0:1])
    nl.store(out, r)
    return out


def reference(a):
    return np.exp(a[:64])
