"""err_unexpected_output_dependencies: `sbuf_tile += t` across nl.affine_range iterations (a VectorE
read-modify-write of the same elements, not a PSUM matmul accumulation).  Strict-only: the affine_range
docstring counts associative reductions as no loop-carried dependency and AWS's fused-mamba tutorial
accumulates `scanC_accum[...] += scanC` in SBUF inside an affine_range, while the compiler has failed on
the form (aws-neuron-sdk#1056, TEN404) and AWS advises `+=` only for matmul (nki-samples#47)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unexpected_output_dependencies.rmw"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unexpected-output-dependencies; "
    "general/nki/api/nki/language/__init__.py affine_range (associative reductions are no loop-carried "
    "dependency; matmul accumulation is the documented example); general/nki/examples/fused_mamba/"
    "mamba_nki_kernels.py (SBUF += in an affine_range); aws-neuron-sdk#1056; nki-samples#47"
)
CODE = "E029"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        acc += nl.load(a[i])  # <- blame
    nl.store(out, acc)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(4):
        acc[...] = nl.add(acc, nl.load(a[i]))
    nl.store(out, acc)
    return out


def reference(a):
    return a.sum(axis=0)
