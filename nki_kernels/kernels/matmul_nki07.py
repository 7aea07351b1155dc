"""Blocked matrix multiplication in NKI 0.7 (``import nki``): ``matmul(lhsT, rhs)`` and
``matmul_mk(lhs, rhs)``, the same computation, plan and limits as ``matmul.py`` (NKI 0.1).

What is shared with the 0.1 kernel: the input checks (same ValueErrors), the tiling plan
(:func:`nki_kernels.kernels.matmul.plan_matmul`, computed on the host, see ``_nki07``), the
oracle and the test shapes.  What is NKI 0.7 here:

- every ISA call names its destination first and returns nothing (``nisa.nc_matmul(dst=acc,
  stationary=..., moving=..., accumulate=...)``);
- accumulation is explicit: the first K tile of a group writes its PSUM tile with
  ``accumulate=False`` (no memset), the others add with ``accumulate=True``
  (``nc_matmul`` docstring: False overwrites, True accumulates);
- strided HBM blocks are access patterns (``.ap(pattern=[[stride, count], ...], offset=...)``,
  as nki-library's ``fgcc.py`` loads matmul blocks), not ``nl.mgrid`` index grids;
- the group's PSUM accumulators are a list of tiles (each its own ``name=``), the output the
  kernel allocates in ``nl.shared_hbm`` and returns;
- loops are Python ``range`` loops (every NKI 0.7 loop is unrolled at specialisation), and the
  kernel code keeps to what the language guide documents and nki-library's kernels use
  (``range``, ``len``, ``min``, list ``append``, tuples; no comprehensions, ``enumerate`` or
  ``zip``).

Engines: TensorE (nc_matmul, nc_transpose), ScalarE/VectorE (tensor_copy eviction), DMA.  No
construct outside the documented 0.6 API; nothing hardware-unproven (no flag needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_kernels.backend import resolve
from nki_kernels.kernels._nki07 import HostEntry, host_spec
from nki_kernels.kernels.matmul import TILE_K, TILE_M, TILE_N, _check_args, plan_matmul

nki, nl, nisa = resolve("0.7").modules  # the real `nki` on a device, the interpreter elsewhere


@dataclass
class MatmulTiling(nl.NKIObject):  # type: ignore[name-defined]  # nl: the resolved API module
    """The fields of ``matmul.MatmulPlan`` the kernel reads: ints, bools, tuples only."""

    M: int
    N: int
    K: int
    transpose_lhs: bool
    resident: bool
    chunk_tiles: int
    group_m: int
    group_n: int
    m_blocks: tuple  # ((m0, rows), ...)
    n_blocks: tuple  # ((n0, cols), ...)
    k_parts: tuple  # ((k0, full K tiles, partial rows), ...)
    evict_split: bool


def _tiling(plan, transpose_lhs: bool) -> MatmulTiling:
    return MatmulTiling(
        M=plan.M,
        N=plan.N,
        K=plan.K,
        transpose_lhs=transpose_lhs,
        resident=plan.resident,
        chunk_tiles=plan.chunk_tiles,
        group_m=plan.group_m,
        group_n=plan.group_n,
        m_blocks=plan.m_blocks,
        n_blocks=plan.n_blocks,
        k_parts=plan.k_parts,
        evict_split=plan.evict_split,
    )


def _tile_sizes(total, tile):
    sizes = []
    for _ in range(total // tile):
        sizes.append(tile)
    if total % tile:
        sizes.append(total % tile)
    return sizes


# ---- loads ------------------------------------------------------------------------------------


def _k_major(src, k0, k_full, c0, cols):
    """``k_full`` whole K tiles of ``src`` (K rows x W cols, HBM) as (partition, tile, column):
    element [p, t, c] = src[k0 + t*128 + p, c0 + c]; rows of ``cols`` contiguous elements."""
    w = src.shape[1]
    return src.ap(pattern=[[w, TILE_K], [TILE_K * w, k_full], [1, cols]], offset=k0 * w + c0)


def _load_k_part(dst, src, k0, k_full, k_rem, c0, cols):
    """One K part of a block: whole K tiles in one DMA, then the partial K tile."""
    if k_full:
        nisa.dma_copy(dst=dst[:, 0:k_full, 0:cols], src=_k_major(src, k0, k_full, c0, cols))
    if k_rem:
        r = k0 + k_full * TILE_K
        nisa.dma_copy(dst=dst[0:k_rem, k_full, 0:cols], src=src[r : r + k_rem, c0 : c0 + cols])


def _transpose_tiles(dst, stage, t0, ntiles, ksz, m_off, msz):
    """dst[0:ksz, t0 + q, m_off:+msz] = stage[0:msz, (t0+q)*128 : +ksz].T for q < ntiles
    (<= 4 TensorE transposes into one PSUM bank in the input dtype, then one copy out)."""
    tp = nl.ndarray((TILE_K, 4, TILE_M), dtype=stage.dtype, buffer=nl.psum)
    for q in range(ntiles):
        c = (t0 + q) * TILE_K
        nisa.nc_transpose(dst=tp[0:ksz, q, 0:msz], data=stage[0:msz, c : c + ksz])
    nisa.tensor_copy(dst=dst[0:ksz, t0 : t0 + ntiles, m_off : m_off + msz], src=tp[0:ksz, 0:ntiles, 0:msz])


def _transpose_rows(dst, lhs, m0, m_off, msz, k0, k_full, k_rem):
    """One row tile of row-major lhs (msz rows x K part) -> K-major columns of dst."""
    kcols = k_full * TILE_K + k_rem
    stage = nl.ndarray((TILE_M, kcols), dtype=lhs.dtype, buffer=nl.sbuf)
    r = m0 + m_off
    nisa.dma_copy(dst=stage[0:msz, 0:kcols], src=lhs[r : r + msz, k0 : k0 + kcols])
    n4, r4 = k_full // 4, k_full % 4
    for q in range(n4):
        _transpose_tiles(dst, stage, q * 4, 4, TILE_K, m_off, msz)
    if r4:
        _transpose_tiles(dst, stage, n4 * 4, r4, TILE_K, m_off, msz)
    if k_rem:
        _transpose_tiles(dst, stage, k_full, 1, k_rem, m_off, msz)


def _load_lhs_part(dst, a, transpose_lhs, m0, rows, k0, k_full, k_rem):
    """The lhsT part [p, t, m] = A[m0 + m, k0 + t*128 + p]: straight from lhsT, or row tiles
    of row-major lhs loaded contiguously and transposed on TensorE."""
    if not transpose_lhs:
        _load_k_part(dst, a, k0, k_full, k_rem, m0, rows)
        return
    m_full, m_rem = rows // TILE_M, rows % TILE_M
    for j in range(m_full):
        _transpose_rows(dst, a, m0, j * TILE_M, TILE_M, k0, k_full, k_rem)
    if m_rem:
        _transpose_rows(dst, a, m0, m_full * TILE_M, m_rem, k0, k_full, k_rem)


def _part_tiles(k_parts, cols, dtype, operand):
    """One K-major SBUF tile (128, K tiles of the part, cols) per K part: a list of tiles,
    named per operand and part (distinct tensors, live at the same time)."""
    tiles = []
    for i in range(len(k_parts)):
        kf, kr = k_parts[i][1], k_parts[i][2]
        tiles.append(
            nl.ndarray((TILE_K, kf + (1 if kr else 0), cols), dtype=dtype, buffer=nl.sbuf, name=f"{operand}_k{i}")
        )
    return tiles


def _load_blocks(k_parts, lhs_tiles, a, transpose_lhs, m0, rows, rhs_tiles, rhs, n0, cols):
    """K part 0 of both operands, then part 1, so TensorE can start on part 0 while part 1 is
    in flight; ``lhs_tiles`` None keeps the resident lhsT block."""
    for i in range(len(k_parts)):
        k0, kf, kr = k_parts[i]
        if lhs_tiles is not None:
            _load_lhs_part(lhs_tiles[i], a, transpose_lhs, m0, rows, k0, kf, kr)
        _load_k_part(rhs_tiles[i], rhs, k0, kf, kr, n0, cols)


# ---- one PSUM group of output tiles -------------------------------------------------------------


def _accumulate(accs, parts, m_sizes, m_off, n_sizes, n_off, first):
    """accs[j, q] (+)= lhsT[:, t, m tile j].T @ rhs[:, t, n tile q] over every K tile of
    ``parts`` ((lhsT tile, rhs tile, full K tiles, partial rows), ...), K outermost.  The very
    first product of an accumulation group overwrites (``first``), every later one accumulates."""
    for lhs_sb, rhs_sb, k_full, k_rem in parts:
        steps = []
        for t in range(k_full):
            steps.append((t, TILE_K))
        if k_rem:
            steps.append((k_full, k_rem))
        for t, ksz in steps:
            i = 0
            for j in range(len(m_sizes)):
                m = m_off + j * TILE_M
                for q in range(len(n_sizes)):
                    n = n_off + q * TILE_N
                    nisa.nc_matmul(
                        dst=accs[i],
                        stationary=lhs_sb[0:ksz, t, m : m + m_sizes[j]],
                        moving=rhs_sb[0:ksz, t, n : n + n_sizes[q]],
                        accumulate=not first,
                    )
                    i += 1
            first = False
    return first


def _new_accumulators(m_sizes, n_sizes):
    """One fp32 PSUM tile (one 2 KiB bank) per output tile of the group, row-major."""
    accs = []
    for msz in m_sizes:
        for nsz in n_sizes:
            accs.append(nl.ndarray((msz, nsz), dtype=nl.float32, buffer=nl.psum, name=f"acc{len(accs)}"))
    return accs


def _evict_and_store(out, accs, m_sizes, n_sizes, r0, c0, split):
    """PSUM -> SBUF (cast to out.dtype on ScalarE, or alternating VectorE/ScalarE when
    ``split``) -> one HBM store of the group's full row tiles, one more for a partial one."""
    cols = sum(n_sizes)
    res = nl.ndarray((TILE_M, len(m_sizes), cols), dtype=out.dtype, buffer=nl.sbuf)
    i, m_full = 0, 0
    for j in range(len(m_sizes)):
        msz = m_sizes[j]
        if msz == TILE_M:
            m_full += 1
        for q in range(len(n_sizes)):
            eng = nisa.engine.vector if split and i % 2 == 0 else nisa.engine.scalar
            nisa.tensor_copy(dst=res[0:msz, j, q * TILE_N : q * TILE_N + n_sizes[q]], src=accs[i], engine=eng)
            i += 1
    if m_full:
        w = out.shape[1]
        dst = out.ap(pattern=[[w, TILE_M], [TILE_M * w, m_full], [1, cols]], offset=r0 * w + c0)
        nisa.dma_copy(dst=dst, src=res[:, 0:m_full, 0:cols])
    if m_full < len(m_sizes):
        mr = m_sizes[-1]
        r = r0 + m_full * TILE_M
        nisa.dma_copy(dst=out[r : r + mr, c0 : c0 + cols], src=res[0:mr, m_full, 0:cols])


def _group(out, parts, m_sizes, m_off, n_sizes, n_off, m0, n0, split):
    """One group of <= 4 output tiles: accumulate over K, evict, store."""
    accs = _new_accumulators(m_sizes, n_sizes)
    _accumulate(accs, parts, m_sizes, m_off, n_sizes, n_off, True)
    _evict_and_store(out, accs, m_sizes, n_sizes, m0 + m_off, n0 + n_off, split)


def _groups(n_full, rem, per_group, tile):
    """Tile sizes of each output tile group along one axis: full groups of ``per_group`` tiles,
    then one group of the remaining full tiles and the partial one."""
    groups = []
    for _ in range(n_full // per_group):
        groups.append(_tile_sizes(per_group * tile, tile))
    tail = _tile_sizes((n_full % per_group) * tile + rem, tile)
    if tail:
        groups.append(tail)
    return groups


def _block_groups(out, parts, m0, rows, n0, cols, gm, gn, split):
    """All output tile groups of one resident (rows x cols) block, full groups first."""
    m_full, m_rem = rows // TILE_M, rows % TILE_M
    n_full, n_rem = cols // TILE_N, cols % TILE_N
    m_groups = _groups(m_full, m_rem, gm, TILE_M)
    n_groups = _groups(n_full, n_rem, gn, TILE_N)
    n_off = 0
    for n_sizes in n_groups:
        m_off = 0
        for m_sizes in m_groups:
            _group(out, parts, m_sizes, m_off, n_sizes, n_off, m0, n0, split)
            m_off += len(m_sizes) * TILE_M
        n_off += len(n_sizes) * TILE_N


# ---- drivers --------------------------------------------------------------------------------------


def _resident_blocks(out, a, rhs, t):
    """Per m-block one lhsT block (all of K) kept across the n-blocks."""
    for m0, rows in t.m_blocks:
        lhs_tiles = _part_tiles(t.k_parts, rows, rhs.dtype, "lhsT")  # loaded with the first rhs block
        for nb in range(len(t.n_blocks)):
            n0, cols = t.n_blocks[nb]
            rhs_tiles = _part_tiles(t.k_parts, cols, rhs.dtype, "rhs")
            _load_blocks(
                t.k_parts, lhs_tiles if nb == 0 else None, a, t.transpose_lhs, m0, rows, rhs_tiles, rhs, n0, cols
            )
            parts = []
            for i in range(len(t.k_parts)):
                parts.append((lhs_tiles[i], rhs_tiles[i], t.k_parts[i][1], t.k_parts[i][2]))
            _block_groups(out, parts, m0, rows, n0, cols, t.group_m, t.group_n, t.evict_split)


def _chunked_blocks(out, a, rhs, t):
    """Every block is one PSUM group; K streams through it in chunks of ``chunk_tiles`` tiles."""
    k_full, k_rem = t.K // TILE_K, t.K % TILE_K
    kc = t.chunk_tiles
    chunks = []
    for c in range(k_full // kc):
        chunks.append((c * kc * TILE_K, kc, 0))
    if k_full % kc or k_rem:
        chunks.append(((k_full // kc) * kc * TILE_K, k_full % kc, k_rem))
    for m0, rows in t.m_blocks:
        for n0, cols in t.n_blocks:
            m_sizes, n_sizes = _tile_sizes(rows, TILE_M), _tile_sizes(cols, TILE_N)
            accs = _new_accumulators(m_sizes, n_sizes)
            first = True
            for k0, kf, kr in chunks:
                lhs_tiles = _part_tiles(((k0, kf, kr),), rows, rhs.dtype, "lhsT")
                rhs_tiles = _part_tiles(((k0, kf, kr),), cols, rhs.dtype, "rhs")
                _load_blocks(((k0, kf, kr),), lhs_tiles, a, t.transpose_lhs, m0, rows, rhs_tiles, rhs, n0, cols)
                part = (lhs_tiles[0], rhs_tiles[0], kf, kr)
                first = _accumulate(accs, (part,), m_sizes, 0, n_sizes, 0, first)
            _evict_and_store(out, accs, m_sizes, n_sizes, m0, n0, t.evict_split)


@nki.jit
def matmul_kernel(a, rhs, t):
    """The device kernel behind :data:`matmul` / :data:`matmul_mk`; ``t`` is a MatmulTiling."""
    out = nl.ndarray((t.M, t.N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    if t.resident:
        _resident_blocks(out, a, rhs, t)
    else:
        _chunked_blocks(out, a, rhs, t)
    return out


def _prepare(kernel, lhs_name, lhs, rhs, lhs_layout):
    """matmul.py's input checks (same ValueErrors), then the shared plan."""
    transpose = lhs_layout == "(M, K)"
    m, n, k, isz = _check_args(kernel, lhs_name, host_spec(lhs), host_spec(rhs), lhs_layout)
    plan = plan_matmul(m, n, k, isz, transpose_lhs=transpose)
    return (lhs, rhs, _tiling(plan, transpose)), {}


matmul = HostEntry(
    lambda lhsT, rhs: _prepare("matmul", "lhsT", lhsT, rhs, "(K, M)"),
    matmul_kernel,
    "matmul",
    """C = lhsT.T @ rhs (lhsT (K, M), rhs (K, N) in HBM) in rhs.dtype: the NKI 0.7 port of
    ``matmul.matmul`` (same plan, layout, limits and numerics; see its docstring).""",
)
matmul_mk = HostEntry(
    lambda lhs, rhs: _prepare("matmul_mk", "lhs", lhs, rhs, "(M, K)"),
    matmul_kernel,
    "matmul_mk",
    """C = lhs @ rhs for row-major lhs (M, K): the NKI 0.7 port of
    ``matmul.matmul_mk`` (lhsT blocks built on chip with TensorE transposes).""",
)
