"""pm.kernel_range: a Python `range` loop in the kernel function becomes nl.sequential_range, so its variable
is a symbolic index too (here it indexes a Python list)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.kernel_range"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py sequential_range (range is replaced "
    "by sequential_range); general/nki/programming_model.rst 'Tile size considerations'"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.load(a[0]), nl.load(a[1])]
    for i in range(2):
        nl.store(out[i], tiles[i])  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.load(a[0]), nl.load(a[1])]
    for i in nl.static_range(2):
        nl.store(out[i], tiles[i])
    return out


def reference(a):
    return a
