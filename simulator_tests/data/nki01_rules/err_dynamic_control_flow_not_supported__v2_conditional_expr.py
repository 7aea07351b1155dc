"""err_dynamic_control_flow_not_supported (second form): a conditional expression (x if tile else y) on a loaded flag.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_dynamic_control_flow_not_supported"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-dynamic-control-flow-not-supported"
CODE = "E015"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), np.ones((1, 1), np.float32))


@nki.jit
def bad(a, flag):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    f = nl.load(flag)
    r = nl.exp(t) if f else t  # <- blame
    nl.store(out, r)
    return out


@nki.jit
def good(a, flag):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    f = nl.load(flag)
    r = nl.add(t, nl.multiply(nl.subtract(nl.exp(t), t), f))
    nl.store(out, r)
    return out


def reference(a, flag):
    return np.exp(a) if flag[0, 0] else a
