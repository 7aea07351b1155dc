"""ki.direct_allocation_hbm (second form): an nl.private_hbm scratch tensor in a directly allocated kernel."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.direct_allocation_hbm"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst (direct allocation: nl.hbm / nl.private_hbm "
    "tensors are not allowed)"
)
CODE = "E030"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    spill = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.private_hbm)  # <- blame
    t[...] = nl.load(a)
    nl.store(spill, t)
    t[...] = nl.load(spill)
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(a)
    nl.store(out, t)
    return out


def reference(a):
    return a
