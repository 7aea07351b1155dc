"""err_tensor_creation_on_scratchpad_with_init_value_not_supported: nl.full/zeros/ones on a directly
allocated SBUF/PSUM buffer."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_tensor_creation_on_scratchpad_with_init_value_not_supported"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst"
    "#err-tensor-creation-on-scratchpad-with-init-value-not-supported"
)
CODE = "E030"
STRICT = False


def inputs():
    return (np.zeros((128, 512), np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.full(  # <- blame
        (nl.par_dim(128), 512), fill_value=1.0, dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0)
    )
    nl.store(out, t)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = 1.0
    nl.store(out, t)
    return out


def reference(a):
    return np.ones((128, 512), np.float32)
