"""pm.index_needs_int (second form): nl.program_id used as a Python list subscript in an SPMD kernel (decision 11)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Representing data in NKI' (program_id yields an "
    "Index); "
    "docs/nki-0.1-rules.md section 11 item 11"
)
CODE = "E028"
STRICT = False
GRID = (2,)


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    starts = [0, 64]
    col = starts[nl.program_id(0)]  # <- blame
    nl.store(out[:, col : col + 64], nl.load(a[:, col : col + 64]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nl.store(out[:, nl.ds(pid * 64, 64)], nl.load(a[:, nl.ds(pid * 64, 64)]))
    return out


def reference(a):
    return a
