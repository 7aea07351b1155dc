"""err_num_partition_mismatch: nisa.tensor_tensor operands with different partition counts (broadcast_to first)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_num_partition_mismatch"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-num-partition-mismatch"
CODE = "E002"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((1, 512)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    z = nisa.tensor_tensor(nl.load(x), nl.load(y), op=nl.add)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    y1 = nl.load(y).broadcast_to((128, 512))
    z = nisa.tensor_tensor(nl.load(x), y1, op=nl.add)
    nl.store(out, z)
    return out


def reference(x, y):
    return x + y
