"""err_cannot_update_immutable_parameter (second form): nl.store into the second, non-returned input."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_cannot_update_immutable_parameter"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-cannot-update-immutable-parameter"
CODE = "E012"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32))


@nki.jit
def bad(x, scratch):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(scratch, nl.exp(nl.load(x)))  # <- blame
    nl.store(out, nl.load(scratch))
    return out


@nki.jit
def good(x, scratch):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tmp = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    nl.store(tmp, nl.exp(nl.load(x)))
    nl.store(out, nl.load(tmp))
    return out


def reference(x, scratch):
    return np.exp(x)
