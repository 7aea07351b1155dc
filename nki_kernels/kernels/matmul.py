"""Blocked matrix multiplication on TensorE: ``matmul(lhsT, rhs)`` and ``matmul_mk(lhs, rhs)``.

Both kernels compute ``C = A @ B`` with fp32 accumulation in PSUM and return ``C`` in the
inputs' dtype.  ``matmul`` takes ``A`` already transposed (``lhsT``, K-major, the layout
TensorE wants); ``matmul_mk`` takes row-major ``A`` and transposes it on chip.

Tiling is decided on the host from the shapes alone by :func:`plan_matmul` (a pure-Python,
static plan: every loop bound and tile size is a compile-time int), so partial tiles on every
axis (M, N, K of any size >= 1) are handled by static peeled code, never by clamping.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_kernels.backend import nisa, nki, nl
from nki_kernels.kernels import tiling as T
from nki_kernels.kernels._checks import check_float, check_rank, check_same_dtype, fail

# ---- hardware tile limits (trn2; nl.tile_size via kernels/tiling.py) -----------------------
TILE_K = T.PMAX  # 128: contraction tile = partition dim
TILE_M = T.STATIONARY_FMAX  # 128: stationary free size (output rows per tile)
TILE_N = T.MOVING_FMAX  # 512: moving free size = one 2 KiB fp32 PSUM bank
# ---- tuning constants (ours) --------------------------------------------------------------
GROUP_TILES = T.PSUM_BANKS // 2  # PSUM accumulators per output tile group; 2 groups in flight = 8 banks
SBUF_RESERVE = 20 * 1024  # bytes/partition left to the compiler (alignment, spills, slack)
SBUF_BUDGET = T.SBUF_BYTES - SBUF_RESERVE  # bytes/partition the plan may use (192,504 on trn2)
RUN_BYTES = 2048  # contiguous bytes per partition row a DMA should move (trn2-hardware §2)
K_PARTS = 2  # resident blocks are split along K into this many SBUF tiles (pipeline fill)
# first-order numbers for choosing blocks (trn2-hardware.md §1.2, §1.3)
PE_FLOPS = 78.64e12  # TensorE bf16/fp16 peak per NeuronCore (fp32: 1/4)
DMA_BYTES_PER_S = 368e9  # practical DMA bandwidth per NeuronCore (16 engines x 23 B/ns)
DMA_BUSY_MAX = 0.75  # keep the DMA queues at most this busy in steady state
DMA_BIAS = 0.05  # weight of DMA time in the block choice: prefer less HBM traffic


_cdiv, _roundup = T.cdiv, T.round_up


@dataclass(frozen=True)
class MatmulPlan:
    """Static tiling of one matmul (all sizes in elements unless named *_bytes).

    k_tiles        ceil(K / 128)
    chunk_tiles    K tiles held in SBUF at once; == k_tiles in "resident" mode (all of K fits),
                   fewer in "chunked" mode (K streamed through the PSUM accumulators)
    block_m/n      SBUF block: lhsT block (K x block_m) and rhs block (K x block_n)
    group_m/n      output tiles per PSUM group (group_m x group_n <= GROUP_TILES)
    m_blocks       ((m0, rows), ...); n_blocks likewise
    k_parts        ((k0, full K tiles, rows of a partial K tile), ...): the SBUF tiles one block
                   (resident mode) or one chunk (chunked mode) of K is split into
    evict_split    alternate PSUM evictions between VectorE and ScalarE (short groups) instead of
                   ScalarE only (VectorE then only zeroes the next group's accumulators)
    sbuf_bytes     planned SBUF bytes per partition (double-buffered working set)
    hbm_read_bytes / hbm_write_bytes   HBM traffic the plan implies
    """

    M: int
    N: int
    K: int
    itemsize: int
    transpose_lhs: bool
    k_tiles: int
    chunk_tiles: int
    block_m: int
    block_n: int
    group_m: int
    group_n: int
    m_blocks: tuple
    n_blocks: tuple
    k_parts: tuple
    evict_split: bool
    sbuf_bytes: int
    hbm_read_bytes: int
    hbm_write_bytes: int

    @property
    def resident(self) -> bool:
        return self.chunk_tiles == self.k_tiles


def _working_set(kc, bm, bn, gm, gn, isz, transpose_lhs):
    """SBUF bytes per partition, every tile double-buffered (allocated inside its loop)."""
    ws = 2 * (kc * bm * isz + kc * bn * isz + gm * gn * TILE_N * isz)
    if transpose_lhs:
        ws += 2 * kc * TILE_K * isz  # row-major lhs staging tile (rows, K chunk)
    return ws


def _blocks(total: int, size: int) -> tuple:
    """((start, size), ...) covering ``total``; no ``range`` (kernels may treat it as a loop)."""
    out, s = [], 0
    while s < total:
        out.append((s, min(size, total - s)))
        s += size
    return tuple(out)


def _split_k(k0: int, rows: int, nparts: int) -> tuple:
    """Split K rows [k0, k0 + rows) into <= nparts runs of whole 128-row tiles (the partial
    tile, if any, ends the last run): ((k0, full tiles, partial rows), ...)."""
    k_full, k_rem = divmod(rows, TILE_K)
    kt = k_full + (1 if k_rem else 0)
    n = max(1, min(nparts, kt))
    out, t0, i = [], 0, 1
    while i <= n:
        t1 = kt * i // n
        kr = k_rem if i == n else 0
        out.append((k0 + t0 * TILE_K, t1 - t0 - (1 if kr else 0), kr))
        t0, i = t1, i + 1
    return tuple(out)


def _estimate_us(M, N, K, itemsize, bm, bn, kc, n_parts, reads):
    """First-order time of a plan (us): pipeline fill (the first K part of the first lhsT and
    rhs blocks at DMA speed) + max(TensorE, DMA / DMA_BUSY_MAX) + DMA_BIAS * DMA time."""
    peak = PE_FLOPS * (0.25 if itemsize == 4 else 1.0)
    t_pe = 2.0 * M * N * K / peak * 1e6
    t_dma = (reads + M * N * itemsize) / DMA_BYTES_PER_S * 1e6
    first_rows = min(K, _cdiv(kc, n_parts) * TILE_K)
    fill = first_rows * (min(bm, M) + min(bn, N)) * itemsize / DMA_BYTES_PER_S * 1e6
    return fill + max(t_pe, t_dma / DMA_BUSY_MAX) + DMA_BIAS * t_dma


def plan_matmul(
    M: int, N: int, K: int, itemsize: int, transpose_lhs: bool = False, sbuf_budget: int | None = None
) -> MatmulPlan:
    """Choose block sizes for an (M, K) x (K, N) matmul with ``itemsize``-byte inputs.

    Candidates, all within ``sbuf_budget`` bytes per partition with every tile double-buffered:
      resident  all of K in SBUF; the lhsT block (K x block_m) is loaded once per m-block and
                kept across the n-blocks: HBM reads = M*K + ceil(M/block_m)*K*N elements.
                block_n = group_n * 512 with group_n = 2 for 16-bit inputs (2 KiB rows) or 1;
                block_m any multiple of 128, balanced over the m-blocks.
      chunked   (any K) one PSUM group per block, K streamed through it in chunks of the
                largest size that fits: reads = ceil(N/block_n)*M*K + ceil(M/block_m)*K*N.
    The candidate with the smallest :func:`_estimate_us` wins (ties: larger blocks).
    """
    if sbuf_budget is None:
        sbuf_budget = SBUF_BUDGET
    kt = _cdiv(K, TILE_K)
    mp, np_ = _roundup(M, TILE_M), _roundup(N, TILE_N)
    pref_gn = max(1, RUN_BYTES // (TILE_N * itemsize))  # 2 for 2-byte, 1 for fp32
    best = None
    for gn in sorted({min(pref_gn, _cdiv(N, TILE_N)), 1}, reverse=True):
        gm = min(GROUP_TILES // gn, _cdiv(M, TILE_M))
        bn = min(gn * TILE_N, np_)
        # resident: every block_m that fits
        spare = sbuf_budget - _working_set(kt, 0, bn, gm, gn, itemsize, transpose_lhs)
        bm_max = min(mp, max(0, spare) // (2 * kt * itemsize) // TILE_M * TILE_M)
        bm_try = TILE_M
        while bm_try <= bm_max:
            bm = min(mp, _roundup(_cdiv(M, _cdiv(M, bm_try)), TILE_M))  # balanced m-blocks
            reads = (M * K + _cdiv(M, bm) * K * N) * itemsize
            t = _estimate_us(M, N, K, itemsize, bm, bn, kt, K_PARTS, reads)
            if best is None or t < best[0] - 1e-9 or (abs(t - best[0]) <= 1e-9 and bm * bn > best[2] * best[3]):
                best = (t, gm, bm, bn, gn, kt)
            bm_try += TILE_M
        # chunked: one group per block
        bm = min(gm * TILE_M, mp)
        fixed = _working_set(0, bm, bn, gm, gn, itemsize, transpose_lhs)
        per_k = _working_set(1, bm, bn, gm, gn, itemsize, transpose_lhs) - fixed
        kc = min(kt, (sbuf_budget - fixed) // per_k)
        if 1 <= kc < kt:  # (kc == kt is a resident plan with less traffic)
            reads = (_cdiv(N, bn) * M * K + _cdiv(M, bm) * K * N) * itemsize
            t = _estimate_us(M, N, K, itemsize, bm, bn, kc, 1, reads)
            if best is None or t < best[0] - 1e-9:
                best = (t, gm, bm, bn, gn, kc)
    if best is None:
        raise ValueError(f"plan_matmul: no blocking of ({M}, {N}, {K}) fits {sbuf_budget} B per partition")
    _, gm, bm, bn, gn, kc = best
    m_blocks, n_blocks = _blocks(M, bm), _blocks(N, bn)
    resident = kc == kt
    if resident:
        reads = (M * K + len(m_blocks) * K * N) * itemsize
    else:
        reads = (len(n_blocks) * M * K + len(m_blocks) * K * N) * itemsize
    # a group's matmuls take k_tiles * 512 * (4 for fp32) TensorE cycles @2.4 GHz per tile, its
    # ScalarE eviction 512 cycles @1.2 GHz: below that, share evictions with VectorE
    split = kt * (4 if itemsize == 4 else 1) < 2
    return MatmulPlan(
        M=M,
        N=N,
        K=K,
        itemsize=itemsize,
        transpose_lhs=transpose_lhs,
        k_tiles=kt,
        chunk_tiles=kc,
        block_m=bm,
        block_n=bn,
        group_m=gm,
        group_n=gn,
        m_blocks=m_blocks,
        n_blocks=n_blocks,
        k_parts=_split_k(0, K if resident else kc * TILE_K, K_PARTS if resident else 1),
        evict_split=split,
        sbuf_bytes=_working_set(kc, bm, bn, gm, gn, itemsize, transpose_lhs),
        hbm_read_bytes=reads,
        hbm_write_bytes=M * N * itemsize,
    )


_tile_sizes = T.tile_sizes


# ---- loads ------------------------------------------------------------------------------------


def _k_major_src(src, k0, k_full, c0, cols):
    """HBM access pattern of ``k_full`` whole K tiles as (partition, tile, column):
    [p, t, c] -> src[k0 + t*128 + p, c0 + c]; rows of ``cols`` contiguous elements."""
    i_p, i_t, i_c = nl.mgrid[0:TILE_K, 0:k_full, 0:cols]
    return src[k0 + i_t * TILE_K + i_p, c0 + i_c]


def _load_partial_k(dst, src, *, k0, k_full, k_rem, c0, cols):
    """The last, partial K tile (k_rem < 128 rows) of a K part into dst[0:k_rem, k_full, :]."""
    r = k0 + k_full * TILE_K
    nisa.dma_copy(dst=dst[0:k_rem, k_full, 0:cols], src=src[r : r + k_rem, c0 : c0 + cols])


def _transpose_tiles(dst, stage, *, t0, ntiles, ksz, m_off, msz):
    """dst[0:ksz, t0 + q, m_off:m_off+msz] = stage[0:msz, (t0+q)*128 : +ksz].T for q < ntiles
    (<= 4 TensorE transposes into one PSUM bank, then one copy back to SBUF)."""
    tp = nl.ndarray((TILE_K, 4, TILE_M), stage.dtype, buffer=nl.psum)
    for q in nl.affine_range(ntiles):
        c = (t0 + q) * TILE_K
        tp[0:ksz, q, 0:msz] = nisa.nc_transpose(stage[0:msz, c : c + ksz])
    dst[0:ksz, t0 : t0 + ntiles, m_off : m_off + msz] = nisa.tensor_copy(tp[0:ksz, 0:ntiles, 0:msz])


def _transpose_rows(dst, lhs, *, m0, m_off, msz, k0, k_full, k_rem):
    """One row tile of row-major lhs (msz rows x K chunk) -> K-major columns of dst."""
    kcols = k_full * TILE_K + k_rem
    stage = nl.ndarray((TILE_M, kcols), lhs.dtype, buffer=nl.sbuf)
    r = m0 + m_off
    nisa.dma_copy(dst=stage[0:msz, 0:kcols], src=lhs[r : r + msz, k0 : k0 + kcols])
    n4, r4 = divmod(k_full, 4)
    if n4:
        for q in nl.affine_range(n4):
            _transpose_tiles(dst, stage, t0=q * 4, ntiles=4, ksz=TILE_K, m_off=m_off, msz=msz)
    if r4:
        _transpose_tiles(dst, stage, t0=n4 * 4, ntiles=r4, ksz=TILE_K, m_off=m_off, msz=msz)
    if k_rem:
        _transpose_tiles(dst, stage, t0=k_full, ntiles=1, ksz=k_rem, m_off=m_off, msz=msz)


def _load_lhs_transposed(dst, lhs, *, m0, rows, k0, k_full, k_rem):
    """dst[p, t, m] = lhs[m0 + m, k0 + t*128 + p]: row tiles loaded contiguously, transposed on TensorE."""
    m_full, m_rem = divmod(rows, TILE_M)
    if m_full:
        for j in nl.affine_range(m_full):
            _transpose_rows(dst, lhs, m0=m0, m_off=j * TILE_M, msz=TILE_M, k0=k0, k_full=k_full, k_rem=k_rem)
    if m_rem:
        _transpose_rows(dst, lhs, m0=m0, m_off=m_full * TILE_M, msz=m_rem, k0=k0, k_full=k_full, k_rem=k_rem)


# ---- one PSUM group of output tiles -------------------------------------------------------------


def _new_accumulators(m_sizes, n_sizes):
    """Up to GROUP_TILES zeroed fp32 PSUM tiles (one bank each), row-major over (m tile, n tile).

    Each accumulator is its own tensor; the compiler's allocator decides the physical tiles
    per tensor (2.26 general/nki/nki_direct_allocation_guide.rst, automatic allocation), and
    the explicit name= gives each position in the group its own rotation in the cost model."""
    shapes = tuple((msz, nsz) for msz in m_sizes for nsz in n_sizes)
    return tuple(nl.zeros(shp, nl.float32, buffer=nl.psum, name=f"acc{i}") for i, shp in enumerate(shapes))


def _matmul_step(accs, lhsT_sb, rhs_sb, *, t, ksz, m_sizes, m_off, n_sizes, n_off):
    """accs[j, q] += lhsT_sb[0:ksz, t, m tile j].T @ rhs_sb[0:ksz, t, n tile q] for the group."""
    i = 0
    for j, msz in enumerate(m_sizes):
        m = m_off + j * TILE_M
        stationary = lhsT_sb[0:ksz, t, m : m + msz]
        for q, nsz in enumerate(n_sizes):
            n = n_off + q * TILE_N
            accs[i][...] += nisa.nc_matmul(stationary, rhs_sb[0:ksz, t, n : n + nsz])
            i += 1


def _accumulate(accs, parts, m_sizes, m_off, n_sizes, n_off):
    """Accumulate the group over every K tile held in SBUF, K outermost.  ``parts``: static
    tuple of (lhsT tile (128, t, rows), rhs tile (128, t, cols), full K tiles, partial rows)."""
    group = dict(m_sizes=m_sizes, m_off=m_off, n_sizes=n_sizes, n_off=n_off)
    for lhsT_sb, rhs_sb, k_full, k_rem in parts:
        if k_full:
            for t in nl.affine_range(k_full):
                _matmul_step(accs, lhsT_sb, rhs_sb, t=t, ksz=TILE_K, **group)
        if k_rem:
            _matmul_step(accs, lhsT_sb, rhs_sb, t=k_full, ksz=k_rem, **group)


def _row_tiles_dst(out, r0, m_full, c0, cols):
    """HBM access pattern of ``m_full`` 128-row tiles as (partition, tile, column)."""
    i_p, i_j, i_c = nl.mgrid[0:TILE_M, 0:m_full, 0:cols]
    return out[r0 + i_j * TILE_M + i_p, c0 + i_c]


def _evict_and_store(out, accs, *, m_sizes, n_sizes, r0, c0, split):
    """PSUM -> SBUF (cast to out.dtype on ScalarE, or alternating VectorE/ScalarE when ``split``)
    -> one HBM store of the group's full row tiles (rows of sum(n_sizes) contiguous elements),
    one more for a partial row tile."""
    cols = sum(n_sizes)
    res = nl.ndarray((TILE_M, len(m_sizes), cols), out.dtype, buffer=nl.sbuf)
    i = 0
    for j, msz in enumerate(m_sizes):
        for q, nsz in enumerate(n_sizes):
            eng = nisa.vector_engine if split and i % 2 == 0 else nisa.scalar_engine
            res[0:msz, j, q * TILE_N : q * TILE_N + nsz] = nisa.tensor_copy(accs[i], dtype=out.dtype, engine=eng)
            i += 1
    m_full = sum(1 for msz in m_sizes if msz == TILE_M)
    if m_full == 1:
        nisa.dma_copy(dst=out[r0 : r0 + TILE_M, c0 : c0 + cols], src=res[:, 0, 0:cols])
    elif m_full > 1:
        nisa.dma_copy(dst=_row_tiles_dst(out, r0, m_full, c0, cols), src=res[:, 0:m_full, 0:cols])
    if m_full < len(m_sizes):
        mr = m_sizes[-1]
        r = r0 + m_full * TILE_M
        nisa.dma_copy(dst=out[r : r + mr, c0 : c0 + cols], src=res[0:mr, m_full, 0:cols])


def _group(out, parts, *, m_sizes, m_off, n_sizes, n_off, m0, n0, split):
    """One group of <= 4 output tiles: zero its PSUM banks, accumulate over K, evict, store."""
    accs = _new_accumulators(m_sizes, n_sizes)
    _accumulate(accs, parts, m_sizes, m_off, n_sizes, n_off)
    _evict_and_store(out, accs, m_sizes=m_sizes, n_sizes=n_sizes, r0=m0 + m_off, c0=n0 + n_off, split=split)


def _block_groups(out, parts, *, m0, rows, n0, cols, gm, gn, split):
    """All output tile groups of one (rows x cols) block whose operands are resident in SBUF:
    full (gm x gn)-tile groups in affine loops, the partial edge groups peeled (static sizes)."""
    m_full, m_rem = divmod(rows, TILE_M)
    n_full, n_rem = divmod(cols, TILE_N)
    full_m, n_mg = (TILE_M,) * gm, m_full // gm
    tail_m = (TILE_M,) * (m_full % gm) + ((m_rem,) if m_rem else ())
    full_n, n_ng = (TILE_N,) * gn, n_full // gn
    tail_n = (TILE_N,) * (n_full % gn) + ((n_rem,) if n_rem else ())
    fixed = dict(m0=m0, n0=n0, split=split)
    if n_ng:
        for g_n in nl.affine_range(n_ng):
            if n_mg:
                for g_m in nl.affine_range(n_mg):
                    _group(
                        out,
                        parts,
                        m_sizes=full_m,
                        m_off=g_m * gm * TILE_M,
                        n_sizes=full_n,
                        n_off=g_n * gn * TILE_N,
                        **fixed,
                    )
            if tail_m:
                _group(
                    out,
                    parts,
                    m_sizes=tail_m,
                    m_off=n_mg * gm * TILE_M,
                    n_sizes=full_n,
                    n_off=g_n * gn * TILE_N,
                    **fixed,
                )
    if tail_n:
        if n_mg:
            for g_m in nl.affine_range(n_mg):
                _group(
                    out,
                    parts,
                    m_sizes=full_m,
                    m_off=g_m * gm * TILE_M,
                    n_sizes=tail_n,
                    n_off=n_ng * gn * TILE_N,
                    **fixed,
                )
        if tail_m:
            _group(
                out, parts, m_sizes=tail_m, m_off=n_mg * gm * TILE_M, n_sizes=tail_n, n_off=n_ng * gn * TILE_N, **fixed
            )


def _part_tiles(k_parts, cols, dtype, role):
    """One K-major SBUF tile (128, K tiles of the part, cols) per K part, each named
    ``<role>_k<part>`` (its own buffer rotation)."""
    return tuple(
        nl.ndarray((TILE_K, kf + (1 if kr else 0), cols), dtype, buffer=nl.sbuf, name=f"{role}_k{i}")
        for i, (_, kf, kr) in enumerate(k_parts)
    )


def _load_part(dst, src, *, k0, kf, kr, c0, cols):
    """All whole K tiles of one part in one DMA, the partial K tile in a second."""
    if kf:
        nisa.dma_copy(dst=dst[:, 0:kf, 0:cols], src=_k_major_src(src, k0, kf, c0, cols))
    if kr:
        _load_partial_k(dst, src, k0=k0, k_full=kf, k_rem=kr, c0=c0, cols=cols)


def _load_blocks(k_parts, *, lhsT_tiles, a, transpose_lhs, m0, rows, rhs_tiles, rhs, n0, cols):
    """Fill the K parts of the rhs block, and of the lhsT block unless ``lhsT_tiles`` is None.

    Order: part 0 of both operands, then part 1, so TensorE can start on part 0 while part 1
    is in flight."""
    for p, (k0, kf, kr) in enumerate(k_parts):
        if lhsT_tiles is not None:
            if transpose_lhs:
                _load_lhs_transposed(lhsT_tiles[p], a, m0=m0, rows=rows, k0=k0, k_full=kf, k_rem=kr)
            else:
                _load_part(lhsT_tiles[p], a, k0=k0, kf=kf, kr=kr, c0=m0, cols=rows)
        _load_part(rhs_tiles[p], rhs, k0=k0, kf=kf, kr=kr, c0=n0, cols=cols)


def _zip_parts(lhsT_tiles, rhs_tiles, k_parts):
    return tuple((lt, rt, kf, kr) for lt, rt, (_, kf, kr) in zip(lhsT_tiles, rhs_tiles, k_parts, strict=True))


# ---- chunked mode (K too large to keep resident) -----------------------------------------------


def _chunk(accs, a, rhs, *, transpose_lhs, k0, k_full, k_rem, m0, rows, n0, cols, m_sizes, n_sizes):
    """Load one K chunk of both operands and accumulate the block's (single) group over it."""
    k_parts = ((k0, k_full, k_rem),)
    lhsT_tiles = _part_tiles(k_parts, rows, rhs.dtype, "lhsT")
    rhs_tiles = _part_tiles(k_parts, cols, rhs.dtype, "rhs")
    _load_blocks(
        k_parts,
        lhsT_tiles=lhsT_tiles,
        a=a,
        transpose_lhs=transpose_lhs,
        m0=m0,
        rows=rows,
        rhs_tiles=rhs_tiles,
        rhs=rhs,
        n0=n0,
        cols=cols,
    )
    _accumulate(accs, _zip_parts(lhsT_tiles, rhs_tiles, k_parts), m_sizes, 0, n_sizes, 0)


def _chunked_block(out, a, rhs, *, transpose_lhs, plan, m0, rows, n0, cols):
    """One PSUM group (rows x cols) accumulated over all of K, streamed in chunks of K tiles."""
    m_sizes, n_sizes = _tile_sizes(rows, TILE_M), _tile_sizes(cols, TILE_N)
    accs = _new_accumulators(m_sizes, n_sizes)
    k_full, k_rem = divmod(plan.K, TILE_K)
    kc = plan.chunk_tiles
    n_chunks, last_full = divmod(k_full, kc)
    block = dict(transpose_lhs=transpose_lhs, m0=m0, rows=rows, n0=n0, cols=cols, m_sizes=m_sizes, n_sizes=n_sizes)
    if n_chunks:
        for c in nl.affine_range(n_chunks):
            _chunk(accs, a, rhs, k0=c * kc * TILE_K, k_full=kc, k_rem=0, **block)
    if last_full or k_rem:
        _chunk(accs, a, rhs, k0=n_chunks * kc * TILE_K, k_full=last_full, k_rem=k_rem, **block)
    _evict_and_store(out, accs, m_sizes=m_sizes, n_sizes=n_sizes, r0=m0, c0=n0, split=plan.evict_split)


# ---- driver -------------------------------------------------------------------------------------


def _resident_blocks(out, a, rhs, plan, transpose_lhs):
    """Resident mode: per m-block one lhsT block (all of K) kept across the n-blocks."""
    for mb in nl.static_range(len(plan.m_blocks)):
        m0, rows = plan.m_blocks[mb]
        lhsT_tiles = _part_tiles(plan.k_parts, rows, rhs.dtype, "lhsT")  # loaded with the first rhs block
        for nb in nl.static_range(len(plan.n_blocks)):
            n0, cols = plan.n_blocks[nb]
            rhs_tiles = _part_tiles(plan.k_parts, cols, rhs.dtype, "rhs")
            _load_blocks(
                plan.k_parts,
                lhsT_tiles=lhsT_tiles if nb == 0 else None,
                a=a,
                transpose_lhs=transpose_lhs,
                m0=m0,
                rows=rows,
                rhs_tiles=rhs_tiles,
                rhs=rhs,
                n0=n0,
                cols=cols,
            )
            _block_groups(
                out,
                _zip_parts(lhsT_tiles, rhs_tiles, plan.k_parts),
                m0=m0,
                rows=rows,
                n0=n0,
                cols=cols,
                gm=plan.group_m,
                gn=plan.group_n,
                split=plan.evict_split,
            )


def _chunked_blocks(out, a, rhs, plan, transpose_lhs):
    """Chunked mode: every block is one PSUM group; K streams through it in chunks."""
    for mb in nl.static_range(len(plan.m_blocks)):
        m0, rows = plan.m_blocks[mb]
        for nb in nl.static_range(len(plan.n_blocks)):
            n0, cols = plan.n_blocks[nb]
            _chunked_block(out, a, rhs, transpose_lhs=transpose_lhs, plan=plan, m0=m0, rows=rows, n0=n0, cols=cols)


def _matmul_blocks(out, a, rhs, plan, transpose_lhs):
    if plan.resident:
        _resident_blocks(out, a, rhs, plan, transpose_lhs)
    else:
        _chunked_blocks(out, a, rhs, plan, transpose_lhs)


def _check_args(kernel, lhs_name, lhs, rhs, lhs_layout):
    d0, d1 = check_rank(kernel, lhs_name, lhs, 2, lhs_layout)
    k2, n = check_rank(kernel, "rhs", rhs, 2, "(K, N)")
    check_float(kernel, lhs_name, lhs)
    name = check_float(kernel, "rhs", rhs)
    check_same_dtype(kernel, {lhs_name: lhs, "rhs": rhs})
    k = d0 if lhs_layout == "(K, M)" else d1
    m = d1 if lhs_layout == "(K, M)" else d0
    if k2 != k:
        fail(
            kernel,
            "rhs",
            f"shape {(k2, n)} with K={k2} but {lhs_name} {tuple(lhs.shape)} has K={k}",
            f"rhs.shape[0] == {lhs_name}.shape[{0 if lhs_layout == '(K, M)' else 1}]",
        )
    return m, n, k, T.itemsize(name)


@nki.jit
def matmul(lhsT, rhs):
    """C = lhsT.T @ rhs on TensorE, blocked so SBUF-resident operand blocks are reused across
    many output tiles; fp32 accumulation in PSUM, result in rhs.dtype.

    Layout:
        lhsT  (K, M)  HBM input; A transposed (K-major).  In SBUF, K is the partition axis.
        rhs   (K, N)  HBM input.  In SBUF, K is the partition axis.
        out   (M, N)  HBM (nl.shared_hbm), rhs.dtype, returned.  In PSUM/SBUF result tiles the
              output rows (M) are the partition axis.
    Tiling (plan_matmul(M, N, K, itemsize); every size and trip count is a static int):
        TILE_K = 128 partitions; TILE_M = 128 (stationary free); TILE_N = 512 (moving free =
        one 2 KiB fp32 PSUM bank).  A group is group_m x group_n <= 4 output tiles accumulated
        together with K outermost (each stationary tile feeds group_n moving tiles); a group
        holds 4 PSUM banks, so two groups in flight use all 8.
        L1 m-block (static_range): lhsT block, SBUF (128, K/128, block_m), kept for all n-blocks,
           loaded once with the first rhs block.
        L2 n-block (static_range): rhs block, SBUF (128, K/128, block_n).  Both blocks are split
           in K_PARTS = 2 K halves (separate tiles); DMA order lhsT/rhs half 0, then half 1, so
           TensorE starts after a quarter of the first blocks' bytes.  One DMA per half.
        L3 group (affine_range over full groups, partial edge groups peeled): 4 PSUM tiles.
        L4 K tile (affine_range): group_m x group_n nc_matmul, 128x128 stationary x 128x512
           moving.  Then ScalarE evicts PSUM -> SBUF result (128, group_m, group_n*512) with the
           cast, and one DMA stores the group (rows of group_n*512 contiguous elements).
        Every SBUF tile is allocated in its loop (double-buffered); the plan's working set is
        2*(K/128)*(block_m + block_n)*isz + 2*4*512*isz bytes/partition <= SBUF_BUDGET
        (nl.tile_size.total_available_sbuf_size - 20 KiB = 192,504 B on trn2).  block_n = 1024 for 16-bit
        (2 KiB rows) or 512; among
        the block_m that fit, plan_matmul minimises fill + max(TensorE, DMA/0.75) + 5% of DMA.
          4096^3 bf16: block 896 x 512: 2*32*896*2 + 2*32*512*2 + 8,192 = 188,416 B;
                       HBM reads M*K + ceil(M/896)*K*N = 32 + 5*32 MiB = 192 MiB, writes 32 MiB
                       (per-output-tile reloading would read 1,280 MiB).
          2048^3 bf16: block 512 x 512 (a short pipeline fill beats less traffic here):
                       73,728 B; reads 8 + 4*8 = 40 MiB, writes 8 MiB.
        Chunked mode (when resident blocks would be too thin, e.g. 4096-wide outputs with fp32
        K >= 4096 or 16-bit K >= 8192): each block is one
        group (group_m*128 x group_n*512) and K streams through its PSUM tiles in chunks of
        chunk_tiles K tiles; reads ceil(N/block_n)*M*K + ceil(M/block_m)*K*N elements.
    Constraints:
        Raise ValueError before any instruction: lhsT or rhs not an array or not rank 2; a dimension < 1;
        dtype not float32/float16/bfloat16; lhsT and rhs dtypes differ; lhsT.shape[0] !=
        rhs.shape[0].  No size limit otherwise: partial tiles on every axis are peeled.
        Tested on the interpreter: M, N, K in 1..1100 (hypothesis: random up to 300/700/300),
        shuffled affine loops + NaN poison; traced (no numerics) 2048^3 and 4096^3.
    Numerics:
        fp32/fp16/bf16 inputs go to TensorE unconverted; products accumulate in fp32 PSUM over
        all of K (across K halves and chunks too); one rounding to rhs.dtype at eviction.
        Matches the float64 oracle within nki_kernels/tolerances.py (fp32 rtol 1e-4, fp16
        1e-2, bf16 3e-2 plus atol relative to max|C|).
    Pseudocode:
        for m0, bm in m_blocks:                                      # static
            A = sbuf[128, K/128, bm] (2 K halves)
            for n0, bn in n_blocks:                                  # static
                B = sbuf[128, K/128, bn] (2 K halves); dma A (first n-block only), B
                for group of (group_m x group_n) tiles in (bm x bn):  # affine
                    acc[0..3] = zeros psum[128, 512] fp32
                    for k in K tiles:                                # affine
                        for (i, j) in group: acc[i, j] += nc_matmul(A[:, k, i], B[:, k, j])
                    res[:, i, j] = tensor_copy(acc[i, j], out.dtype)  # ScalarE
                    dma res -> out[m0 + rows(group), n0 + cols(group)]
    Cost notes (nki_kernels.perf.estimate, trn2 benchmark mode; estimates, not measurements):
        TensorE-bound.  4096^3 bf16: 92.5 % MFU, 1,889 us; 2048^3 bf16: 86.0 %, 254 us (the
        cost model charges 32 cycles of instruction overhead per 512-column matmul, ~6 %, plus
        the pipeline fill and the last group's eviction and store).  DMA queues 30-45 % busy;
        ScalarE evictions a few %.  K <= 128 with 16-bit inputs is eviction-bound: there
        evictions alternate VectorE/ScalarE (plan.evict_split).
    Engines: TensorE matmuls (and transposes in matmul_mk), ScalarE/VectorE PSUM evictions
        (tensor_copy), DMA loads/stores; no GpSimd.  Accumulators and K-part tiles are named
        allocations (name=), one tensor each: the compiler allocates physical tiles per tensor
        (2.26 general/nki/nki_direct_allocation_guide.rst), not per source line.
    """
    M, N, K, isz = _check_args("matmul", "lhsT", lhsT, rhs, "(K, M)")
    out = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    _matmul_blocks(out, lhsT, rhs, plan_matmul(M, N, K, isz), transpose_lhs=False)
    return out


@nki.jit
def matmul_mk(lhs, rhs):
    """C = lhs @ rhs for row-major lhs: :func:`matmul` with the lhsT blocks built on chip.

    Layout:
        lhs   (M, K)  HBM input, row-major.  Row tiles land in SBUF with M on the partition
              axis (rows of K contiguous elements), then are transposed to K on partitions.
        rhs   (K, N)  HBM input; out (M, N) HBM, rhs.dtype, returned (as matmul).
    Tiling:
        As matmul; the lhsT block (per K half / chunk) is filled per 128-row tile of lhs:
        one DMA stages (rows, K part) in SBUF (128, K part) [double-buffered], then TensorE
        nc_transpose of 128x128 blocks, four per PSUM bank (128, 4, 128) in the input dtype,
        and one tensor_copy of the bank into the lhsT block.  The staging tile is counted in
        the plan: + 2*(K part)*isz bytes/partition.
    Constraints:
        As matmul, with lhs.shape[1] == rhs.shape[0] (else ValueError naming rhs and K).
    Numerics:
        Transposes are exact (no rounding); then as matmul.
    Pseudocode:
        for each m-block, K half:                      # static / explicit
            for each 128-row tile r of the block:      # affine
                S = dma lhs[rows r, K half]            # contiguous rows
                for 4-tile groups q: P[:, q, :] = nc_transpose(S[:, k-tile q]); A[:, q.., r] = tensor_copy(P)
        then the n-block / group / K loops of matmul on A.
    Cost notes (estimates): transposes add (M/128)*(K/128) TensorE ops (~3% of the work) but
        TensorE idles at each m-block start while the 2-deep staging ring loads, transposes
        and copies row tile by row tile (in-order queues), which also re-arms the TensorE
        throttle: 2048^3 bf16 74.3 % MFU (294 us, corrected cost model).
    """
    M, N, K, isz = _check_args("matmul_mk", "lhs", lhs, rhs, "(M, K)")
    out = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    _matmul_blocks(out, lhs, rhs, plan_matmul(M, N, K, isz, transpose_lhs=True), transpose_lhs=True)
    return out
