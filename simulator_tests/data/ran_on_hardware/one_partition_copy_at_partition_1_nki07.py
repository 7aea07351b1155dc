"""`nisa.tensor_copy(dst=t[h:h + 1, 0:1], src=...)` for h = 0..3: one-partition engine writes starting at
partitions 1, 2, 3 (the arch guide's start-partition table is the compiler allocator's business)."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "NxDI's ZAYA1 model code (NKI 0.7): a 1-partition tensor_copy destination starting at partition kv_h"
NKI = "0.7"
WARNS = {"arch.start_partition"}


def inputs():
    return (np.random.default_rng(20).standard_normal((4, 1)).astype(np.float32),)


@nki.jit
def kernel(v):
    out = nl.ndarray((4, 1), dtype=v.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray((4, 1), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=v)
    t = nl.ndarray((4, 1), dtype=v.dtype, buffer=nl.sbuf)
    for h in range(4):
        one = nl.ndarray((1, 1), dtype=v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=one, src=v[h : h + 1, 0:1])
        nisa.tensor_copy(dst=t[h : h + 1, 0:1], src=one)
    nisa.dma_copy(dst=out, src=t)
    return out


def reference(v):
    return v
