"""err_dynamic_control_flow_not_supported (second form): an if on a comparison of a loaded tile's element."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_dynamic_control_flow_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-dynamic-control-flow-not-supported"
CODE = "E015"
STRICT = False


def inputs():
    return (np.full((1, 8), 3.0, np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, t)
    if t[0, 0] > 2.0:  # <- blame
        nl.store(out, nl.multiply(t, 2.0))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    scale = nl.add(nl.greater(t[0:1, 0:1], 2.0, dtype=nl.float32), 1.0)
    nl.store(out, nisa.tensor_scalar(t, np.multiply, scale))
    return out


def reference(a):
    return np.where(a[0, 0] > 2.0, a * 2.0, a).astype(np.float32)
