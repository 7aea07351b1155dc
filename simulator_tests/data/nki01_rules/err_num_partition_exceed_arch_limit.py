"""err_num_partition_exceed_arch_limit: an on-chip tile with more than 128 partitions."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_exceed_arch_limit"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-exceed-arch-limit"
CODE = "E001"
STRICT = False


def inputs():
    return (np.zeros((256, 64), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.zeros((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    nl.store(out, x)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        x = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nl.store(out[i * 128 : (i + 1) * 128, :], x)
    return out


def reference(a):
    return np.zeros_like(a)
