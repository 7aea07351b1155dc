"""pm.tc2: a PSUM tile holds at most 2 KiB per partition (512 fp32, nl.tile_size.psum_fmax)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.tc2_psum_fmax"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Tile size considerations' [TC#2]"
CODE = "E004"
STRICT = False


def inputs():
    return (np.zeros((128, 1024), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 1024), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    for j in nl.affine_range(2):
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        nl.store(out[:, j * 512 : (j + 1) * 512], nl.copy(acc))
    return out


def reference(a):
    return np.zeros((128, 1024), np.float32)
