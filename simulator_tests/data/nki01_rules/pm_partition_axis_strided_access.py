"""pm.partition_access: advanced (strided) indexing is supported along the free axes only, not along the
partition axis of an on-chip tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.partition_access"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Advanced Tensor Indexing'"
CODE = "E026"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out, nl.exp(t[2 * i_p, i_f]))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(a[2 * i_p, i_f])
    nl.store(out, nl.exp(t))
    return out


def reference(a):
    return np.exp(a[::2])
