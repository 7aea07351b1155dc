"""isa.range_select_bounds: range_select's bound0/bound1 are fp32 with one element per partition."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.range_select_bounds"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py range_select"
CODE = "E009"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    lo = nisa.memset((128, 1), 8.0, dtype=nl.float16)
    hi = nisa.memset((128, 1), 40.0, dtype=nl.float16)
    r = nisa.range_select(  # <- blame
        on_true_tile=nl.load(a),
        comp_op0=np.greater_equal,
        comp_op1=np.less,
        bound0=lo,
        bound1=hi,
        on_false_value=nl.fp32.min,
    )
    nl.store(out, r)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    lo = nisa.memset((128, 1), 8.0, dtype=nl.float32)
    hi = nisa.memset((128, 1), 40.0, dtype=nl.float32)
    r = nisa.range_select(
        on_true_tile=nl.load(a),
        comp_op0=np.greater_equal,
        comp_op1=np.less,
        bound0=lo,
        bound1=hi,
        on_false_value=nl.fp32.min,
    )
    nl.store(out, r)
    return out


def reference(a):
    i = np.arange(64)
    return np.where((i >= 8) & (i < 40), a, np.finfo(np.float32).min)
