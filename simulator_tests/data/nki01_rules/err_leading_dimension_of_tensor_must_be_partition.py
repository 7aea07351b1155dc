"""err_leading_dimension_of_tensor_must_be_partition: block dimensions in front of the partition axis are
deprecated.  AWS's own 2.26-era kernels still use them on hardware (nki-samples@0898a77
src/nki_samples/reference/attention.py flash_fwd `o_buffer`), so: a warning by default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_leading_dimension_of_tensor_must_be_partition"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-leading-dimension-of-tensor-must-be-partition; "
    "general/nki/nki_block_dimension_migration_guide.rst"
)
CODE = "E010"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    for i in nl.affine_range(4):
        buf[i] = nl.load(a[i])
        nl.store(out[i], buf[i])
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 4, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        buf[:, i, :] = nl.load(a[i])
        nl.store(out[i], buf[:, i, :])
    return out


def reference(a):
    return a
