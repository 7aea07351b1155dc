"""nl.matmul_shapes: nl.matmul(x, y) needs x's free size equal to y's partition size."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.matmul_shapes"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py matmul"
CODE = "E003"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((64, 256)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.matmul(nl.load(x), nl.load(y))  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.matmul(nl.load(x[:, 0:64]), nl.load(y))
    nl.store(out, nl.copy(r))
    return out


def reference(x, y):
    return x[:, :64] @ y
