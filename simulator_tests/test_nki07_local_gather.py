"""``nisa.local_gather`` under NKI 0.7 (dst first; NKI 0.6 isa docstring): each group of 16 partitions gathers
from its own partitions with the indices of those partitions, flattened partition-first.  nki-library's MoE TKG
calls it; it was E100 under 0.7 (the 0.1 instruction is checked by the SDK's golden test)."""

from __future__ import annotations

import numpy as np
import pytest

from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki


def gather(src: np.ndarray, index: np.ndarray, per_idx: int, valid: int) -> np.ndarray:
    @nki.jit
    def k(src, index):
        s = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=src)
        i = nl.ndarray(index.shape, nl.uint16, buffer=nl.sbuf)
        nisa.dma_copy(dst=i, src=index)
        shape = (src.shape[0], valid, per_idx)
        o = nl.ndarray(shape, nl.float32, buffer=nl.sbuf)
        nisa.local_gather(dst=o, src_buffer=s, index=i, num_elem_per_idx=per_idx, num_valid_indices=valid)
        out = nl.ndarray(shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=o)
        return out

    return np.asarray(k(src, index))


def reference(src: np.ndarray, index: np.ndarray, valid: int) -> np.ndarray:
    P, _, per_idx = src.shape
    out = np.empty((P, valid, per_idx), src.dtype)
    for g in range(P // 16):
        idx = index[g * 16 : (g + 1) * 16].flatten("F")[:valid].astype(np.int64)
        for p in range(g * 16, (g + 1) * 16):
            out[p] = src[p][idx]
    return out


@pytest.mark.parametrize(("P", "valid"), [(128, 64), (32, 40)])
def test_each_group_of_16_partitions_gathers_its_own_rows(P, valid):
    rng = np.random.default_rng(P + valid)
    src = (rng.random((P, 96, 2)) * 100).astype(np.float32)
    per_group = rng.integers(0, 96, size=(16, 4)).astype(np.uint16)
    index = np.tile(per_group, (P // 16, 1))
    # the instruction takes element offsets: index * num_elem_per_idx (the SDK's own example)
    out = gather(src, index * 2, 2, valid)
    assert np.isfinite(out).all() and out.any()
    np.testing.assert_array_equal(out, reference(src, index, valid))


def test_a_partition_count_not_a_multiple_of_16_is_rejected():
    src = np.ones((24, 8, 1), np.float32)
    with pytest.raises(ValueError, match="multiple of 16"):
        gather(src, np.zeros((24, 1), np.uint16), 1, 16)
