"""err_num_partition_exceed_arch_limit (second form): nl.load of a whole (256, N) HBM tensor into one tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_exceed_arch_limit"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-exceed-arch-limit; "
    "general/nki/api/nki/language/__init__.py load (note: partition size <= pmax)"
)
CODE = "E001"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)  # <- blame
    nl.store(out, nl.exp(t))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.load(a[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], nl.exp(t))
    return out


def reference(a):
    return np.exp(a)
