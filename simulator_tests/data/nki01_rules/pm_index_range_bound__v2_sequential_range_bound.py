"""pm.index_range_bound (second form): an inner nl.sequential_range whose trip count is an outer symbolic index."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_range_bound"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index); "
    "sources silent on a loop bound given by an index"
)
CODE = "E028"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.sequential_range(i + 1):  # <- blame
            acc[...] = nl.add(acc, nl.load(a[j]))
        nl.store(out[i], acc)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(4):
        acc[...] = nl.add(acc, nl.load(a[i]))
        nl.store(out[i], acc)
    return out


def reference(a):
    return np.cumsum(a, axis=0)
