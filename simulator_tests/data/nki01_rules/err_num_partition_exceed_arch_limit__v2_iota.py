"""err_num_partition_exceed_arch_limit (second form): nisa.iota of an arange spanning 256 partitions."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_exceed_arch_limit"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-exceed-arch-limit; "
    "general/nki/api/nki/isa/__init__.py iota"
)
CODE = "E001"
STRICT = False


def inputs():
    return (np.zeros((256, 1), np.int32),)


@nki.jit
def bad(a):
    out = nl.ndarray((256, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    rows = nisa.iota(nl.arange(256)[:, None], dtype=nl.int32)  # <- blame
    nl.store(out[0:128, :], rows[0:128, :])
    return out


@nki.jit
def good(a):
    out = nl.ndarray((256, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    for k in nl.affine_range(2):
        rows = nisa.iota(k * 128 + nl.arange(128)[:, None], dtype=nl.int32)
        nl.store(out[k * 128 : (k + 1) * 128, :], rows)
    return out


def reference(a):
    return np.arange(256, dtype=np.int32).reshape(256, 1)
