"""err_mutable_parameter_not_returned (second form): a mutable parameter written through nisa.dma_copy and left out of
return.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

RULE = "err_mutable_parameter_not_returned"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-mutable-parameter-not-returned"
CODE = "E016"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(state: nt.mutable_tensor):
    out = nl.ndarray(state.shape, dtype=state.dtype, buffer=nl.shared_hbm)
    y = nl.multiply(nl.load(state), 0.5)
    nl.store(out, y)
    nisa.dma_copy(dst=state, src=y)
    return out  # <- blame


@nki.jit
def good(state: nt.mutable_tensor):
    out = nl.ndarray(state.shape, dtype=state.dtype, buffer=nl.shared_hbm)
    y = nl.multiply(nl.load(state), 0.5)
    nl.store(out, y)
    nisa.dma_copy(dst=state, src=y)
    return out, state


def reference(state):
    return state * 0.5, state * 0.5
