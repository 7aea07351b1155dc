"""err_failed_to_infer_tile_from_local_tensor (second form): an nisa op given a tensor whose partition axis is its
second dimension.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_failed_to_infer_tile_from_local_tensor"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-failed-to-infer-tile-from-local-tensor"
CODE = "E010"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((8, 4, 8)).astype(np.float32),)


@nki.jit
def bad(x):
    out = nl.ndarray((8, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((4, nl.par_dim(8), 8), dtype=nl.float32, buffer=nl.sbuf)
    r = nisa.activation(op=nl.exp, data=a)  # <- blame
    nl.store(out, nl.load(x))
    return out


@nki.jit
def good(x):
    out = nl.ndarray((8, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    r = nisa.activation(op=nl.exp, data=a)
    nl.store(out, r)
    return out


def reference(x):
    return np.exp(x)
