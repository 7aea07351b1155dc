"""err_annotation_shape_mismatch (second form): an annotated loop-body assignment of a loaded tile whose shape differs.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RULE = "err_annotation_shape_mismatch"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-annotation-shape-mismatch"
CODE = "E011"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t: nt.tensor[128, 128] = nl.load(a[i])  # <- blame
        nl.store(out[i], t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t: nt.tensor[128, 64] = nl.load(a[i])
        nl.store(out[i], t)
    return out


def reference(a):
    return a
