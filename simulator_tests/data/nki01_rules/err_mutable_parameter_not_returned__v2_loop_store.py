"""err_mutable_parameter_not_returned (second form): a mutable parameter updated tile by tile in a loop and left
out of return.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RULE = "err_mutable_parameter_not_returned"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-mutable-parameter-not-returned"
CODE = "E016"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 128, 64)).astype(np.float32), rng.standard_normal((2, 128, 64)).astype(np.float32))


@nki.jit
def bad(cache: nt.mutable_tensor, x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.add(nl.load(cache[i]), nl.load(x[i]))
        nl.store(cache[i], t)
        nl.store(out[i], t)
    return out  # <- blame


@nki.jit
def good(cache: nt.mutable_tensor, x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.add(nl.load(cache[i]), nl.load(x[i]))
        nl.store(cache[i], t)
        nl.store(out[i], t)
    return out, cache


def reference(cache, x):
    return cache + x, cache + x
