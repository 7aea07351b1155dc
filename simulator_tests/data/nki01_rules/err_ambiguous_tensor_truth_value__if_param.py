"""err_ambiguous_tensor_truth_value: `if b:` on an optional tensor parameter (use `b is not None`)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_ambiguous_tensor_truth_value"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-ambiguous-tensor-truth-value"
CODE = "E015"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 128)).astype(np.float32))


@nki.jit
def bad(a, b):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    if b:  # <- blame
        t = nl.add(t, nl.load(b))
    nl.store(out, t)
    return out


@nki.jit
def good(a, b):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    t[...] = nl.load(a)
    if b is not None:
        t[...] = nl.add(t, nl.load(b))
    nl.store(out, t)
    return out


def reference(a, b):
    return a + b
