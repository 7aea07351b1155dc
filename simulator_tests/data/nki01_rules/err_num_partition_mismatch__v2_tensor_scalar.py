"""err_num_partition_mismatch (second form): nisa.tensor_scalar with a vector operand of another partition count."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_mismatch"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-mismatch; "
    "general/nki/api/nki/isa/__init__.py tensor_scalar (operands of shape (data.shape[0], 1))"
)
CODE = "E002"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((128, 1)).astype(np.float32))


@nki.jit
def bad(x, v):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    vec = nl.load(v[0:64, :])
    z = nisa.tensor_scalar(nl.load(x), np.multiply, vec)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, v):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    vec = nl.load(v)
    z = nisa.tensor_scalar(nl.load(x), np.multiply, vec)
    nl.store(out, z)
    return out


def reference(x, v):
    return x * v
