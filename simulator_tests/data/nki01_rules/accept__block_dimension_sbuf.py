"""accept (with the deprecation warning): an SBUF tensor with a block dimension in front of the partition axis.

This case was the strict-only rule `err_leading_dimension_of_tensor_must_be_partition` (E010 under strict); the
sources contradict an error in NKI 0.1 (SDK 2.26), even a strict-only one.  The errors page deprecates block
dimensions, but in 2.26 they are a supported, documented construct: the SDK's own golden test
test_nki_memory_semantics.py declares `(B, nl.par_dim(N), M)` SBUF tensors; the same errors page fixes
err_failed_to_infer_tile_from_local_tensor with a `(4, nl.par_dim(8), 8)` SBUF tensor; the 2.26 direct-allocation
guide counts `num_free_tiles` per block dimension; AWS's flash attention (nki-samples@0898a77, run on hardware)
accumulates into one (accept__loop_reduce_computed_subscript).  The NKI 0.6 migration guide says block dimensions
were removed with NKI 0.2 ("NKI 0.1.0 - uses block dimension"): the error belongs to the 0.2+ front end, where
nki07 raises E010.  Here: a SimWarning naming the declaration, default and strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.block_dimension"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-leading-dimension-of-tensor-must-be-partition, "
    "#err-failed-to-infer-tile-from-local-tensor; general/nki/test/test_nki_memory_semantics.py; "
    "general/nki/nki_block_dimension_migration_guide.rst; aws-neuron-sdk@81ce03ae nki/migration/index.rst "
    "(block dimensions removed in NKI 0.2)"
)
CODE = None
GOOD_WARNS = "block dimensions"


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        buf[i] = nl.load(a[i])
        nl.store(out[i], buf[i])
    return out


def reference(a):
    return a
