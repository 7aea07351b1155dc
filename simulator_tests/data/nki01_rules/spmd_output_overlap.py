"""spmd.output_overlap: the instances of an SPMD grid all write the whole output.  The errors page's
err_unexpected_output_dependencies names the iterations of an affine_range, not SPMD instances, and no other source
makes overlapping instance writes an error: a warning by default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "spmd.output_overlap"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unexpected-output-dependencies (affine_range "
    "iterations only); spec corrections turn 4, item L"
)
CODE = "E029"
STRICT = True
GRID = (2,)


def inputs():
    return (np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nl.store(out, nl.load(a[nl.ds(pid * 128, 128), :]))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nl.store(out[nl.ds(pid * 128, 128), :], nl.load(a[nl.ds(pid * 128, 128), :]))
    return out


def reference(a):
    return a
