"""err_num_partition_mismatch (second form): nisa.tensor_tensor between 128- and 64-partition tiles (not
broadcastable).
"""

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
    return (rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nisa.tensor_tensor(nl.load(x), nl.load(y[0:64, :]), op=nl.multiply)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nisa.tensor_tensor(nl.load(x), nl.load(y), op=nl.multiply)
    nl.store(out, z)
    return out


def reference(x, y):
    return x * y
