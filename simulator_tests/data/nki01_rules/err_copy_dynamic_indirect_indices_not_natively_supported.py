"""err_copy_dynamic_indirect_indices_not_natively_supported: an on-chip copy through a runtime index tile
(`out[...] = sbuf_tile[0, idx_tile, iz]`); use nisa.tensor_copy_dynamic_src."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_copy_dynamic_indirect_indices_not_natively_supported"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-copy-dynamic-indirect-indices-not-natively-supported"
)
CODE = "E014"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((1, 8, 4)).astype(np.float32), np.array([[3, 1, 0, 2, 7, 6, 5, 4]], np.int32))


@nki.jit
def bad(data, idx):
    out = nl.ndarray((1, 8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    data_sb = nl.load(data)
    idx_tile = nl.load(idx)
    out_sb = nl.ndarray((1, 8, 4), dtype=nl.float32, buffer=nl.sbuf)
    ip, iy, iz = nl.mgrid[0:1, 0:8, 0:4]
    out_sb[ip, iy, iz] = data_sb[ip, idx_tile[ip, iy], iz]  # <- blame
    nl.store(out, out_sb)
    return out


@nki.jit
def good(data, idx):
    out = nl.ndarray((1, 8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    data_sb = nl.load(data)
    idx_tile = nl.load(idx)
    out_sb = nl.ndarray((1, 8, 4), dtype=nl.float32, buffer=nl.sbuf)
    ip, iy, iz = nl.mgrid[0:1, 0:8, 0:4]
    out_sb[ip, iy, iz] = nisa.tensor_copy_dynamic_src(data_sb[ip, idx_tile[ip, iy], iz])
    nl.store(out, out_sb)
    return out


def reference(data, idx):
    return data[:, idx[0], :]
