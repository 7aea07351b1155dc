"""isa.tensor_tensor_shape: tensor_tensor's operands have the same partition count and the same number of
elements per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.tensor_tensor_shape"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py tensor_tensor"
CODE = "E011"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nisa.tensor_tensor(nl.load(x), nl.load(y), op=nl.add)  # <- blame
    nl.store(out, z)
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nisa.tensor_tensor(nl.load(x[:, 0:256]), nl.load(y), op=nl.add)
    nl.store(out, z)
    return out


def reference(x, y):
    return x[:, :256] + y
