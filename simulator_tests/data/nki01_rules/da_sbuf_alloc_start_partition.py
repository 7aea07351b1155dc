"""da.start_partition: an allocation function's start partition follows the ISA rule (a tile of more than 64
partitions starts at partition 0)."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.start_partition"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_direct_allocation_guide.rst 'ncc.sbuf.alloc()'; "
    "general/nki/api/nki/compiler/sbuf.py alloc"
)
CODE = "E026"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


def _at_partition_32(idx, pdim_size, fdim_size):
    return (32, 0)


def _at_partition_0(idx, pdim_size, fdim_size):
    return (0, 0)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.alloc(_at_partition_32))  # <- blame
    t[...] = nl.load(a)
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.alloc(_at_partition_0))
    t[...] = nl.load(a)
    nl.store(out, t)
    return out


def reference(a):
    return a
