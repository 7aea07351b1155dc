"""err_tensor_creation_on_scratchpad_with_init_value_not_supported (second form): nl.zeros on a directly
allocated SBUF buffer.
"""

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
    return (np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    data = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    acc = nl.zeros((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512))  # <- blame
    data[...] = nl.load(a)
    acc[...] = nl.add(acc, data)
    nl.store(out, acc)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    data = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    acc = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512))
    acc[...] = 0.0
    data[...] = nl.load(a)
    acc[...] = nl.add(acc, data)
    nl.store(out, acc)
    return out


def reference(a):
    return a
