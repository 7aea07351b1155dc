"""err_num_partition_exceed_arch_limit (second form): nl.ndarray on SBUF with 256 partitions."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_exceed_arch_limit"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-exceed-arch-limit"
CODE = "E001"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((256, 32)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((256, 32), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    buf[...] = nl.load(a)
    nl.store(out, buf)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        buf = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        buf[...] = nl.load(a[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], buf)
    return out


def reference(a):
    return a
