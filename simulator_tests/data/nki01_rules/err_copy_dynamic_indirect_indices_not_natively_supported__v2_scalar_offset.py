"""err_copy_dynamic_indirect_indices_not_natively_supported (second form): an assignment copy whose source
column is a runtime offset read from a tile, one column per loop iteration.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_copy_dynamic_indirect_indices_not_natively_supported"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-copy-dynamic-indirect-indices-not-natively-supported; "
    "general/nki/api/nki/isa/__init__.py tensor_copy_dynamic_src"
)
CODE = "E014"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    offs = np.array([[5, 0, 9, 31, 2, 17, 8, 8, 1, 30, 12, 3, 22, 6, 14, 27]], np.int32)
    return (rng.standard_normal((64, 32)).astype(np.float32), offs)


@nki.jit
def bad(src, offs):
    out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    src_sb = nl.load(src)
    offs_sb = nl.load(offs)
    dst = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.sbuf)
    i_p = nl.arange(64)[:, None]
    i_0 = nl.arange(1)[None, :]
    for k in nl.affine_range(16):
        dst[i_p, k + i_0] = src_sb[i_p, offs_sb[0, k] + i_0]  # <- blame
    nl.store(out, dst)
    return out


@nki.jit
def good(src, offs):
    out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    src_sb = nl.load(src)
    offs_sb = nl.load(offs)
    dst = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.sbuf)
    i_p = nl.arange(64)[:, None]
    i_0 = nl.arange(1)[None, :]
    for k in nl.affine_range(16):
        dst[i_p, k + i_0] = nisa.tensor_copy_dynamic_src(src_sb[i_p, offs_sb[0, k] + i_0])
    nl.store(out, dst)
    return out


def reference(src, offs):
    return src[:, offs[0]]
