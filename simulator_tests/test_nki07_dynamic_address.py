"""A DMA access pattern with a runtime start (``.ap(scalar_offset=...)``, NKI 0.7) is address-checked when the DMA
runs: ``oob_mode=skip`` drops the out-of-bounds points, the default ``oob_mode=error`` is E008 (aws-neuron-sdk
81ce03ae nki/api/nki/isa/__init__.py dma_copy).  It was E008 when the pattern was written, whatever the mode."""

from __future__ import annotations

import numpy as np
import pytest

from nki_kernels.sim.errors import SimIndexError
from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki

ROWS = np.arange(16, dtype=np.float32).reshape(2, 8) + 1


def scatter_rows(first_row: int, mode) -> np.ndarray:
    """Two rows written at row ``first_row`` (a runtime value) of a zeroed (4, 8) output."""

    @nki.jit
    def k(x, offs):
        out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        z = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        nisa.dma_copy(dst=out, src=z)
        o = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=o, src=offs)
        t = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        dst = out.ap(pattern=[[8, 2], [1, 8]], offset=0, scalar_offset=o, indirect_dim=0)
        nisa.dma_copy(dst=dst, src=t, oob_mode=mode)
        return out

    return np.asarray(k(ROWS, np.array([[first_row]], np.int32)))


def test_in_bounds_rows_land_where_the_offset_says():
    out = scatter_rows(1, nisa.oob_mode.error)
    assert np.isfinite(out).all() and out.any()
    np.testing.assert_array_equal(out[1:3], ROWS)
    assert not out[[0, 3]].any()


def test_skip_drops_an_out_of_bounds_start_and_keeps_the_rows_inside():
    assert not scatter_rows(-1000, nisa.oob_mode.skip).any()
    out = scatter_rows(3, nisa.oob_mode.skip)  # row 3 inside, row 4 outside
    np.testing.assert_array_equal(out[3], ROWS[0])
    assert not out[:3].any()


def test_error_mode_rejects_it_when_the_dma_runs():
    with pytest.raises(SimIndexError, match=r"\[E008\] dma_copy\(oob_mode\).*oob_mode\.skip"):
        scatter_rows(-1000, nisa.oob_mode.error)


def gather_rows(rows: np.ndarray, mode) -> np.ndarray:
    """Rows of a (6, 8) table picked by a (4, 1) SBUF index tile (``vector_offset``), into a zeroed tile."""
    table = np.arange(48, dtype=np.float32).reshape(6, 8) + 1

    @nki.jit
    def k(t, r):
        idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=r)
        g = nl.ndarray((4, 8), dtype=t.dtype, buffer=nl.sbuf)
        nisa.memset(dst=g, value=0.0)
        src = t.ap(pattern=[[8, 4], [1, 8]], offset=0, vector_offset=idx, indirect_dim=0)
        nisa.dma_copy(dst=g, src=src, oob_mode=mode)
        out = nl.ndarray((4, 8), dtype=t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=g)
        return out

    return np.asarray(k(table, rows.reshape(4, 1).astype(np.int32))), table


def test_vector_offset_rows_of_minus_one_are_skipped_or_rejected():
    """nki-library's MoE token maps pad with -1 and gather with oob_mode=skip (bwmm_shard_on_block.py)."""
    out, table = gather_rows(np.array([5, -1, 0, 2]), nisa.oob_mode.skip)
    assert np.isfinite(out).all() and out.any()
    np.testing.assert_array_equal(out[[0, 2, 3]], table[[5, 0, 2]])
    assert not out[1].any()
    with pytest.raises(SimIndexError, match=r"\[E008\] dma_copy\(oob_mode\)"):
        gather_rows(np.array([5, -1, 0, 2]), nisa.oob_mode.error)
