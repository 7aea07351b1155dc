"""ki.operator_partition_broadcast (second form): the * operator between a (128, N) tile and a (1, N) tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.operator_partition_broadcast"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Unsupported Syntax' (partition broadcasting through "
    "operator overloads)"
)
CODE = "E002"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((1, 256)).astype(np.float32))


@nki.jit
def bad(x, w):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nl.load(x) * nl.load(w)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, w):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nl.multiply(nl.load(x), nl.load(w))
    nl.store(out, z)
    return out


def reference(x, w):
    return x * w
