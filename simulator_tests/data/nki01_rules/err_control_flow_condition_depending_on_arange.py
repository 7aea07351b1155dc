"""err_control_flow_condition_depending_on_arange: an `if` on a predicate built from nl.arange (use mask=)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_control_flow_condition_depending_on_arange"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-control-flow-condition-depending-on-arange"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((1, 2048)).astype(np.float32),)


@nki.jit
def bad(x):
    out = nl.ndarray((1, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for j0 in nl.affine_range(2):
        i1 = nl.arange(512)[None, :]
        j = 1024 + j0 * 512 + i1
        if j > 1536:  # <- blame
            nl.store(out[0, j], nl.add(nl.load(x[0, j]), nl.load(x[0, j - 1024])))
    return out


@nki.jit
def good(x):
    out = nl.ndarray((1, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    for j0 in nl.affine_range(2):
        i1 = nl.arange(512)[None, :]
        j = 1024 + j0 * 512 + i1
        y = nl.add(nl.load(x[0, j]), nl.load(x[0, j - 1024]), mask=j > 1536)
        nl.store(out[0, j], y, mask=j > 1536)
    return out


def reference(x):
    r = np.zeros_like(x)
    r[0, 1537:] = x[0, 1537:] + x[0, 513:1024]
    return r
