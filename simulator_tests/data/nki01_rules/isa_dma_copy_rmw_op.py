"""isa.dma_rmw_op: dma_copy's dst_rmw_op accepts only np.add."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.dma_rmw_op"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py dma_copy"
CODE = "E021"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 1.0)
    nisa.dma_copy(dst=out, src=a, dst_rmw_op=np.multiply)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 1.0)
    nisa.dma_copy(dst=out, src=a, dst_rmw_op=np.add)
    return out


def reference(a):
    return a + 1.0
