"""isa.tensor_tensor_column: a (P, 1) operand of tensor_tensor (tensor_scalar's job per the docstring).  Student
code on trn2 used it: contested -- a warning by default, an error under strict (spec Corrections G)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.tensor_tensor_column"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_tensor, tensor_scalar"
CODE = "E011"
STRICT = True


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((128, 1)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nisa.tensor_tensor(nl.load(x), nl.load(y), op=nl.multiply)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nisa.tensor_scalar(nl.load(x), nl.multiply, nl.load(y))
    nl.store(out, z)
    return out


def reference(x, y):
    return x * y
