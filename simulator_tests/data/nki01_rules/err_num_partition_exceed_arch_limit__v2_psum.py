"""err_num_partition_exceed_arch_limit (second form): a PSUM tile with 256 partitions."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_exceed_arch_limit"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-exceed-arch-limit"
CODE = "E001"
STRICT = False


def inputs():
    return (np.zeros((128, 128), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((256, 128), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, nl.copy(acc[0:128, :]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
    nl.store(out, nl.copy(acc))
    return out


def reference(a):
    return np.zeros((128, 128), np.float32)
