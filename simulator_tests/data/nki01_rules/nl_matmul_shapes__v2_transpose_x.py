"""nl.matmul_shapes (second form): nl.matmul with transpose_x=True whose operands' partition (contraction) sizes
differ.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "nl.matmul_shapes"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py matmul"
CODE = "E003"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 512)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.matmul(nl.load(xT), nl.load(y[0:64, :]), transpose_x=True)  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.matmul(nl.load(xT), nl.load(y), transpose_x=True)
    nl.store(out, nl.copy(r))
    return out


def reference(xT, y):
    return xT.T @ y
