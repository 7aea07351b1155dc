"""err_dynamic_control_flow_not_supported: Python control flow on a tensor's value."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_dynamic_control_flow_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-dynamic-control-flow-not-supported"
CODE = "E015"
STRICT = False


def inputs():
    return (np.ones((1, 1), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    cnd = nl.load(a)
    if cnd:  # <- blame
        nl.store(out, 1.0)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    cnd = nl.load(a)
    nl.store(out, nl.where(nl.not_equal(cnd, 0.0), 1.0, 0.0))
    return out


def reference(a):
    return np.ones((1, 1), np.float32)
