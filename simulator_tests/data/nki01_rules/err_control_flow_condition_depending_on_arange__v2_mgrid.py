"""err_control_flow_condition_depending_on_arange (second form): an if on an nl.mgrid field."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_control_flow_condition_depending_on_arange"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-control-flow-condition-depending-on-arange"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ix = nl.mgrid[0:128, 0:64]
    nl.store(out, 0.0)
    if ix.x < 32:  # <- blame
        nl.store(out[ix.p, ix.x], nl.load(a[ix.p, ix.x]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ix = nl.mgrid[0:128, 0:64]
    nl.store(out, 0.0)
    nl.store(out[ix.p, ix.x], nl.load(a[ix.p, ix.x]), mask=ix.x < 32)
    return out


def reference(a):
    r = np.zeros_like(a)
    r[:, :32] = a[:, :32]
    return r
