"""Small NKI 0.1 kernels that re-create the public trn2 measurements of trn2-hardware.md §3.1.

Written for this project (NKI 0.1 style, names from ``nki_kernels.backend``).  They follow
the *described* structure of the measured kernels (the CS149 part 1 starters are built with
``@nki.compiler.skip_middle_end_transformations``, asst4-trainium2 ``part1/kernels.py``, and so
are these) (CS149 part 1: vector add tiled/stream,
1024x1024 TensorE transpose; nki-autotune's tiny kernels: a reduction, a masked count, an
elementwise add), not their code.  Used by ``nki_kernels.perf.calibration``.
"""

from __future__ import annotations

from nki_kernels.backend import nisa, nki, nl

PMAX = 128  # nl.tile_size.pmax


@nki.compiler.skip_middle_end_transformations
@nki.jit
def vector_add_tiled(a_vec, b_vec, row_chunk=128):
    """#1/#2: (n,) + (n,) in chunks of row_chunk partitions x 1 element."""
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
    n = a_vec.shape[0]
    for m in nl.affine_range(n // row_chunk):
        a_t = nl.ndarray((row_chunk, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((row_chunk, 1), dtype=b_vec.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_t, src=a_vec[m * row_chunk : (m + 1) * row_chunk])
        nisa.dma_copy(dst=b_t, src=b_vec[m * row_chunk : (m + 1) * row_chunk])
        s = nisa.tensor_scalar(a_t, nl.add, b_t)
        nisa.dma_copy(dst=out[m * row_chunk : (m + 1) * row_chunk], src=s)
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def vector_add_stream(a_vec, b_vec, free_dim=2):
    """#3-#6: view the vectors as (128, n/128) and add (128, free_dim) tiles."""
    n = a_vec.shape[0]
    a2 = a_vec.reshape((PMAX, n // PMAX))
    b2 = b_vec.reshape((PMAX, n // PMAX))
    out = nl.ndarray((PMAX, n // PMAX), dtype=a_vec.dtype, buffer=nl.hbm)
    for m in nl.affine_range(n // (PMAX * free_dim)):
        a_t = nl.ndarray((PMAX, free_dim), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((PMAX, free_dim), dtype=b_vec.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_t, src=a2[:, m * free_dim : (m + 1) * free_dim])
        nisa.dma_copy(dst=b_t, src=b2[:, m * free_dim : (m + 1) * free_dim])
        s = nisa.tensor_tensor(a_t, b_t, op=nl.add)
        nisa.dma_copy(dst=out[:, m * free_dim : (m + 1) * free_dim], src=s)
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def transpose_2d(a):
    """#7/#8: (M, N) -> (N, M) in 128x128 blocks: load, TensorE transpose, PSUM->SBUF copy, store."""
    M, N = a.shape
    out = nl.ndarray((N, M), dtype=a.dtype, buffer=nl.hbm)
    for i in nl.affine_range(M // PMAX):
        for j in nl.affine_range(N // PMAX):
            blk = nl.ndarray((PMAX, PMAX), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=blk, src=a[i * PMAX : (i + 1) * PMAX, j * PMAX : (j + 1) * PMAX])
            t_ps = nisa.nc_transpose(blk)
            t_sb = nisa.tensor_copy(t_ps)
            nisa.dma_copy(dst=out[j * PMAX : (j + 1) * PMAX, i * PMAX : (i + 1) * PMAX], src=t_sb)
    return out


@nki.jit
def row_max(x, parts=128):
    """#23-like cascaded max of a (1, n) row: view it as (parts, n/parts), VectorE max along the
    free axis, TensorE transpose of the (parts, 1) column to (1, parts), VectorE max again."""
    n = x.shape[1]
    out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.hbm)
    xv = x.reshape((parts, n // parts))
    t = nl.ndarray((parts, n // parts), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=xv)
    m1 = nisa.tensor_reduce(nl.max, t, axis=(1,), keepdims=True)
    m1_t = nisa.nc_transpose(m1)
    m2 = nisa.tensor_reduce(nl.max, m1_t, axis=(1,), keepdims=True)
    nisa.dma_copy(dst=out, src=m2)
    return out


@nki.jit
def nonzero_count(x):
    """#22-like: mask of non-zeros of a (1, n) row, masked values and their count."""
    vals = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    cnt = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    mask = nisa.tensor_scalar(t, nl.not_equal, 0.0)
    kept = nisa.tensor_tensor(t, mask, op=nl.multiply)
    c = nisa.tensor_reduce(nl.add, mask, axis=(1,), keepdims=True)
    nisa.dma_copy(dst=vals, src=kept)
    nisa.dma_copy(dst=cnt, src=c)
    return vals, cnt


@nki.jit
def add_2d(a, b):
    """#24-like: (R, C) + (R, C) in 128-row tiles."""
    R, C = a.shape
    out = nl.ndarray((R, C), dtype=a.dtype, buffer=nl.hbm)
    for r in nl.affine_range(R // PMAX):
        a_t = nl.ndarray((PMAX, C), dtype=a.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((PMAX, C), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_t, src=a[r * PMAX : (r + 1) * PMAX, :])
        nisa.dma_copy(dst=b_t, src=b[r * PMAX : (r + 1) * PMAX, :])
        s = nisa.tensor_tensor(a_t, b_t, op=nl.add)
        nisa.dma_copy(dst=out[r * PMAX : (r + 1) * PMAX, :], src=s)
    return out


@nki.jit
def dma_only(x):
    """#27-like: one HBM->SBUF DMA of x (P, F) and nothing else (the store is not timed)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ---- CS149 2024 (trn1) structure: nl.load / nl.add / nl.store, (M // TILE_M, 128, FREE_DIM)
#      view for the stream kernel.  Used only for the trn1 cross-check (§3.2), never fitted.


@nki.jit
def vector_add_tiled_v1(a_vec, b_vec, row_chunk=128):
    """#29: (n,) + (n,) in chunks of row_chunk partitions x 1 element, NKI language ops."""
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
    n = a_vec.shape[0]
    for m in nl.affine_range(n // row_chunk):
        a_t = nl.load(a_vec[m * row_chunk : (m + 1) * row_chunk])
        b_t = nl.load(b_vec[m * row_chunk : (m + 1) * row_chunk])
        nl.store(out[m * row_chunk : (m + 1) * row_chunk], value=nl.add(a_t, b_t))
    return out


@nki.jit
def vector_add_stream_v1(a_vec, b_vec, free_dim=2):
    """#30/#31: the vectors viewed as (n / (128 * free_dim), 128, free_dim) contiguous tiles."""
    n = a_vec.shape[0]
    tiles = n // (PMAX * free_dim)
    a3 = a_vec.reshape((tiles, PMAX, free_dim))
    b3 = b_vec.reshape((tiles, PMAX, free_dim))
    out = nl.ndarray((tiles, PMAX, free_dim), dtype=a_vec.dtype, buffer=nl.hbm)
    for m in nl.affine_range(tiles):
        a_t = nl.load(a3[m])
        b_t = nl.load(b3[m])
        nl.store(out[m], value=nl.add(a_t, b_t))
    return out
