"""err_annotation_shape_mismatch: `x: nt.tensor[128, 512] = <a (128, 128) tile>`."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RULE = "err_annotation_shape_mismatch"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-annotation-shape-mismatch"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    data: nt.tensor[128, 512] = nl.zeros((nl.par_dim(128), 128), dtype=nl.float32)  # <- blame
    data[...] = nl.load(a)
    nl.store(out, data)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    data: nt.tensor[128, 128] = nl.zeros((nl.par_dim(128), 128), dtype=nl.float32)
    data[...] = nl.load(a)
    nl.store(out, data)
    return out


def reference(a):
    return a
