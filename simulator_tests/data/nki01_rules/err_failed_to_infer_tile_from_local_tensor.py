"""err_failed_to_infer_tile_from_local_tensor: a compute API on a tensor whose partition axis is not leading."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_failed_to_infer_tile_from_local_tensor"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-failed-to-infer-tile-from-local-tensor"
CODE = "E010"
STRICT = False
GOOD_WARNS = "block dimensions"


def inputs():
    return (np.zeros((4, 8, 8), np.float32),)


@nki.jit
def bad(x):
    out = nl.ndarray((4, 8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.zeros((4, nl.par_dim(8), 8), dtype=nl.float32, buffer=nl.sbuf)
    nl.add(a, 32)  # <- blame
    return out


@nki.jit
def good(x):
    out = nl.ndarray((4, 8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.zeros((4, nl.par_dim(8), 8), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        nl.store(out[i], nl.add(a[i], 32))
    return out


def reference(x):
    return np.full((4, 8, 8), 32, np.float32)
