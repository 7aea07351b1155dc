"""ki.operator_partition_broadcast: `x + y` with x (128, 512) and y (1, 512) -- operator overloads do not
broadcast along the partition axis; call nl.add."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.operator_partition_broadcast"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst (partition broadcasting on operator overloads)"
CODE = "E002"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((1, 512)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nl.load(x) + nl.load(y)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nl.add(nl.load(x), nl.load(y))
    nl.store(out, z)
    return out


def reference(x, y):
    return x + y
