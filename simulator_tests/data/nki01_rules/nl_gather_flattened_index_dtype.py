"""nl.gather_indices: nl.gather_flattened's indices are uint32."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.gather_indices"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py gather_flattened"
CODE = "E009"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 64)).astype(np.float32), rng.integers(0, 64, (32, 16)).astype(np.float32))


@nki.jit
def bad(data, idx):
    out = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nl.gather_flattened(data=nl.load(data), indices=nl.load(idx))  # <- blame
    nl.store(out, g)
    return out


@nki.jit
def good(data, idx):
    out = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nl.gather_flattened(data=nl.load(data), indices=nl.load(idx, dtype=nl.uint32))
    nl.store(out, g)
    return out


def reference(data, idx):
    return np.take_along_axis(data, idx.astype(np.int64), axis=1)
