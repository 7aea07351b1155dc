"""err_shared_hbm_must_in_kernel_level: an nl.shared_hbm tensor created under `if nl.program_id(0) >= 1:`
(a runtime predicate; the errors page's own example)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_shared_hbm_must_in_kernel_level"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-shared-hbm-must-in-kernel-level"
CODE = "E013"
STRICT = False
GRID = (2,)


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    if pid >= 1:
        extra = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)  # <- blame
        nl.store(extra, nl.load(a[pid]))
    nl.store(out[pid], nl.load(a[pid]))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nl.store(out[pid], nl.load(a[pid]))
    return out


def reference(a):
    return a
