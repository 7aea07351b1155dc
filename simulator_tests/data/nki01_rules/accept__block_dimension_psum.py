"""accept (with the deprecation warning): a PSUM tensor with a block dimension in front of the partition axis.

This case was `err_leading_dimension_of_tensor_must_be_partition__v2_psum_block` (E010 under strict); the sources
contradict it.  The 2.26 block-dimension migration guide has no migration for PSUM tensors: its "Migration for
PSUM tensors" section says the backend support for removing blocks in PSUM tensors is still in progress.  AWS's
attention tutorials accumulate matmuls into PSUM block tensors (`qk[i_tile_q, i_tile_kv, :, :] =
nisa.nc_matmul(...)`), and the 2.26 ncc.psum docstring indexes one (`psum[i_block, :, :] = nisa.nc_matmul(...)`).
A SimWarning (deprecated), default and strict; the NKI 0.2+ front end (nki07) rejects it (E010)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.block_dimension"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_block_dimension_migration_guide.rst (Migration for PSUM tensors); "
    "general/nki/api/nki/compiler/psum.py; general/nki/examples/attention/attention_kernels.py:148"
)
CODE = None
GOOD_WARNS = "block dimensions"


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((2, 128, 64)).astype(np.float32))


@nki.jit
def good(w, x):
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.psum)
    st = nl.load(w)
    for i in nl.affine_range(2):
        acc[i] = nisa.nc_matmul(st, nl.load(x[i]))
        nl.store(out[i], acc[i])
    return out


def reference(w, x):
    return np.einsum("km,bkn->bmn", w, x)
