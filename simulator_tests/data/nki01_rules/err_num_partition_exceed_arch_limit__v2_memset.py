"""err_num_partition_exceed_arch_limit (second form): an nisa op (memset) asked for a 256-partition tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_exceed_arch_limit"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-exceed-arch-limit; "
    "general/nki/api/nki/isa/__init__.py memset (shape: partition axis first)"
)
CODE = "E001"
STRICT = False


def inputs():
    return (np.zeros((256, 1), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((256, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nisa.memset((256, 1), 2.0, dtype=nl.float32)  # <- blame
    nl.store(out[0:128, :], t[0:128, :])
    nl.store(out[128:256, :], t[128:256, :])
    return out


@nki.jit
def good(a):
    out = nl.ndarray((256, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nisa.memset((128, 1), 2.0, dtype=nl.float32)
        nl.store(out[i * 128 : (i + 1) * 128, :], t)
    return out


def reference(a):
    return np.full((256, 1), 2.0, np.float32)
