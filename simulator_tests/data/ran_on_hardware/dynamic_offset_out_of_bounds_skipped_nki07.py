"""Scatter rows of a tile into an HBM table at a row read at runtime from SBUF (`.ap(scalar_offset=...)`), with
`oob_mode=skip`: rows that belong nowhere get a far negative offset and are skipped by the DMA."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "aws-neuron/nki-library core/subkernels/indexed_flatten.py (per-expert rows, skipped ones offset below 0)"
NKI = "0.7"


def inputs():
    rows = np.random.default_rng(37).standard_normal((3, 4, 16)).astype(np.float32)
    where = np.array([[2], [-1_000_000], [0]], np.int32)  # block 1 is skipped
    return rows, where


@nki.jit
def kernel(rows, where):
    out = nl.ndarray((12, 16), dtype=rows.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray((12, 16), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.dma_copy(dst=out, src=z)
    for b in nl.sequential_range(3):
        o = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=o, src=where[b : b + 1, :])
        t = nl.ndarray((4, 16), dtype=rows.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=rows[b])
        dst = out.ap(pattern=[[16, 4], [1, 16]], offset=0, scalar_offset=o, indirect_dim=0)
        nisa.dma_copy(dst=dst, src=t, oob_mode=nisa.oob_mode.skip)
    return out


def reference(rows, where):
    out = np.zeros((12, 16), np.float32)
    out[2:6] = rows[0]
    out[0:4] = rows[2]
    return out
