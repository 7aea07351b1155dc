"""err_shared_hbm_must_in_kernel_level (second form): a shared_hbm tensor created in an nl.static_range body (unrolled,
still a loop: docs/nki-0.1-rules.md section 11 item 4).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_shared_hbm_must_in_kernel_level"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-shared-hbm-must-in-kernel-level"
CODE = "E013"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(2):
        scratch = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)  # <- blame
        nl.store(scratch, nl.exp(nl.load(a[i])))
        nl.store(out[i], nl.load(scratch))
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.static_range(2):
        nl.store(scratch[i], nl.exp(nl.load(a[i])))
        nl.store(out[i], nl.load(scratch[i]))
    return out


def reference(a):
    return np.exp(a)
