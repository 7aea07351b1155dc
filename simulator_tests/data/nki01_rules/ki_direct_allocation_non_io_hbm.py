"""ki.direct_allocation_hbm: with direct allocation, HBM tensors other than kernel outputs (nl.hbm,
nl.private_hbm scratch) are not supported."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.direct_allocation_hbm"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst (direct allocation: non-IO HBM); "
    "general/nki/nki_direct_allocation_guide.rst 'Known Limitations' 1"
)
CODE = "E030"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.hbm)  # <- blame
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(a)
    nl.store(scratch, t)
    t[...] = nl.load(scratch)
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(a)
    nl.store(out, t)
    return out


def reference(a):
    return a
