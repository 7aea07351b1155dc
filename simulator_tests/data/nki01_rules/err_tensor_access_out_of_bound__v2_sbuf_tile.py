"""err_tensor_access_out_of_bound (second form): a compute op reads an SBUF tile past its free size."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_access_out_of_bound"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-tensor-access-out-of-bound"
CODE = "E008"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    e = nl.exp(t[:, 32:96])  # <- blame
    nl.store(out, e)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    e = nl.exp(t[:, 32:64])
    nl.store(out, e)
    return out


def reference(a):
    return np.exp(a[:, 32:64])
