"""accept: an nl arithmetic op taking an index expression as an operand (`nl.add(i_f, t)`): an index is a
tensor (programming model: `Index` is a subclass of `Tensor`)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.index_operand"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (Index is a Tensor)"
CODE = None


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    nl.store(out, nl.add(i_f, nl.load(a), dtype=nl.float32))
    return out


def reference(a):
    return a + np.arange(64, dtype=np.float32)[None, :]
