"""arch.start_partition: a compute instruction on a 64-partition slice starting at partition 32.  The arch guide
allows starts 0/64 for 33-64 partitions, but says the start partition is "currently handled by the tensor allocator
in Neuron Compiler", and public code that ran writes other slices (an NxDI NKI 0.7 kernel copies into a
1-partition slice at partition 1).  A warning by default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "arch.start_partition"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/arch/trainium_inferentia2_arch.rst 'Data streaming'; spec corrections turn "
    "4, item K"
)
CODE = "E026"
STRICT = True


def inputs():
    return (np.random.default_rng(6).standard_normal((128, 16)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nisa.tensor_scalar(t[32:96, :], np.multiply, 2.0))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a[32:96, :])
    nl.store(out, nisa.tensor_scalar(t, np.multiply, 2.0))
    return out


def reference(a):
    return a[32:96] * 2.0
