"""da.stack_allocator: nki.compiler.enable_stack_allocator is used together with
skip_middle_end_transformations."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.stack_allocator"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/compiler/__init__.py enable_stack_allocator"
CODE = "E030"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.compiler.enable_stack_allocator
@nki.jit
def bad(a):  # <- blame
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(a)))
    return out


@nki.compiler.enable_stack_allocator
@nki.compiler.skip_middle_end_transformations
@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(a)))
    return out


def reference(a):
    return np.exp(a)
