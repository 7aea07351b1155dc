"""isa.dma_transpose_src: dma_transpose reads HBM or SBUF, never PSUM."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.dma_transpose_src"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py dma_transpose"
CODE = "E007"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_transpose(nl.load(a))
    t = nisa.dma_transpose(p)  # <- blame
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nisa.dma_transpose(a)
    nl.store(out, t)
    return out


def reference(a):
    return a.T
