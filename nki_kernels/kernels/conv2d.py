"""Fused conv2d + bias + max-pool (the CS149 Assignment 4 kernel, Fall 2025, trn2).

Entry point: :func:`fused_conv2d_maxpool` (``@nki.jit``).  The loop diagram is in
``conv2d_design.md`` next to this file.
"""
from __future__ import annotations

import numbers

from nki_kernels.backend import nki, nisa, nl
from nki_kernels.kernels._checks import check_float, check_rank, check_same_dtype, fail

KERNEL = "fused_conv2d_maxpool"

# -- tile constants (trn2, NeuronCore-v3) -------------------------------------------------
TILE_K = 128            # C_in per contraction tile = partitions of stationary and moving (nl.tile_size.pmax)
TILE_M = 128            # C_out per output tile = stationary free size (nl.tile_size.gemm_stationary_fmax)
PSUM_FREE = 512         # fp32 per partition in one PSUM bank = moving free limit (gemm_moving_fmax)
PSUM_BANK_BYTES = 2048  # one PSUM bank per partition; weight transposes are grouped to fill one
SBUF_BYTES = 212984     # usable SBUF bytes per partition (nl.tile_size.total_available_sbuf_size)
SBUF_RESERVE = 8192     # head-room per partition for bias, PSUM-eviction temporaries, allocator slack
WEIGHT_BUDGET = 112 * 1024   # resident transposed weights per partition (one C_out group)
X_TILE_TARGET = 32 * 1024    # input window per partition per C_in tile: big DMAs, yet early compute start
MAX_POOL = 4            # pool_size 1..4 (hard limit of the interface)
EVICT_BUFFERS = 4       # pool > 1: eviction / row-max temporaries in flight per PSUM tile stream

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tiles(n: int, size: int):
    """(number of full tiles, size of the partial last tile or 0)."""
    return n // size, n % size


class _Plan:
    """All static (trace-time) sizes of one call; built by :func:`_plan` before any instruction."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _plan(X, W, bias, pool_size) -> _Plan:
    """Validate the arguments and choose the tiling.  Raises ValueError; emits no instruction."""
    B, C_in, H, W_in = check_rank(KERNEL, "X", X, 4, "(B, C_in, H, W)")
    C_out, C_in_w, KH, KW = check_rank(KERNEL, "W", W, 4, "(C_out, C_in, KH, KW)")
    (n_bias,) = check_rank(KERNEL, "bias", bias, 1, "(C_out,)")
    dname = check_float(KERNEL, "X", X)
    check_float(KERNEL, "W", W)
    check_float(KERNEL, "bias", bias)
    check_same_dtype(KERNEL, {"X": X, "W": W, "bias": bias})
    if C_in_w != C_in:
        fail(KERNEL, "W", f"W.shape[1] = {C_in_w} input channels but X.shape[1] = {C_in}",
             "W of shape (C_out, C_in, KH, KW) with C_in equal to X.shape[1]")
    if n_bias != C_out:
        fail(KERNEL, "bias", f"{n_bias} values for C_out = {C_out} output channels",
             "bias of shape (C_out,) with C_out equal to W.shape[0]")
    if isinstance(pool_size, bool) or not isinstance(pool_size, numbers.Integral):
        fail(KERNEL, "pool_size", f"{pool_size!r} of type {type(pool_size).__name__}",
             f"an int in 1..{MAX_POOL}")
    p = int(pool_size)
    if not 1 <= p <= MAX_POOL:
        fail(KERNEL, "pool_size", p, f"an int in 1..{MAX_POOL}")
    if KH > H or KW > W_in:
        fail(KERNEL, "W", f"a {KH}x{KW} filter for a {H}x{W_in} image",
             "KH <= H and KW <= W (no padding: pad the input before calling)")
    H_out, W_out = H - KH + 1, W_in - KW + 1
    Hp, Wp = H_out // p, W_out // p
    if Hp < 1 or Wp < 1:
        fail(KERNEL, "pool_size", f"{p} for a {H_out}x{W_out} conv output",
             "pool_size <= min(H - KH + 1, W - KW + 1)")
    isz = _ITEMSIZE[dname]
    T = KH * KW
    Hu, Wu = Hp * p, Wp * p      # conv rows/cols that reach the pooled output

    # Column chunks: widths are multiples of p and leave room for >= p rows in one bank.
    cmax = (PSUM_FREE // p) // p * p
    n_cc = _cdiv(Wu, cmax)
    cw = _cdiv(_cdiv(Wu, n_cc), p) * p
    chunks = [(c0, min(cw, Wu - c0)) for c0 in range(0, Wu, cw)]
    # Row tiles: nr rows x cw cols <= 512 fp32 (one PSUM bank); nr a multiple of p, balanced.
    nr_max = min((PSUM_FREE // cw) // p * p, Hu)
    nr = _cdiv(_cdiv(Hu, _cdiv(Hu, nr_max)), p) * p
    n_rt_full, last_rows = _tiles(Hu, nr)
    n_rt = n_rt_full + (1 if last_rows else 0)

    n_ci_full, ci_rem = _tiles(C_in, TILE_K)
    n_ci = n_ci_full + (1 if ci_rem else 0)
    n_co_full, co_rem = _tiles(C_out, TILE_M)
    n_co = n_co_full + (1 if co_rem else 0)
    kp = min(C_in, TILE_K)       # partitions of the input / weight tiles
    mp = min(C_out, TILE_M)      # partitions of the output tiles

    # Weights: C_out tiles per group whose transposed weights stay resident.
    per_co_tile = n_ci * T * mp * isz
    g = min(n_co, WEIGHT_BUDGET // per_co_tile)
    if g < 1:
        fail(KERNEL, "W", f"shape {(C_out, C_in, KH, KW)} {dname}: one 128-channel output tile needs "
             f"{per_co_tile} B of resident weights per partition",
             f"n_ci_tiles * KH * KW * 128 * itemsize <= {WEIGHT_BUDGET} B (e.g. C_in <= "
             f"{WEIGHT_BUDGET // (T * mp * isz) * TILE_K} for this filter and dtype)")
    groups = []      # (first C_out tile, number of full tiles, rows of the partial tile or 0)
    for t0 in range(0, n_co, g):
        nt = min(g, n_co - t0)
        rem = co_rem if (t0 + nt == n_co and co_rem) else 0
        groups.append((t0, nt - (1 if rem else 0), rem))
    w_bytes = min(g * TILE_M, C_out) * n_ci * T * isz

    # Row blocks: G row tiles per input window, double buffered, within what SBUF has left.
    # Pool > 1 also keeps per-PSUM-tile temporaries (ScalarE eviction <= 512 elements, GpSimd
    # row maxima <= 512/p) in X's dtype, EVICT_BUFFERS deep so the engines can run ahead.
    win_max = chunks[0][1] + KW - 1
    evict_tmp = EVICT_BUFFERS * 2 * PSUM_FREE * isz if p > 1 else 0
    free = SBUF_BYTES - SBUF_RESERVE - w_bytes - n_co * isz - evict_tmp

    def block_bytes(G):
        x_t = (G * nr + KH - 1) * win_max * isz
        o_t = (G * nr // p) * (chunks[0][1] // p) * isz
        return x_t, 2 * (n_ci * x_t + o_t)

    if block_bytes(1)[1] > free:
        fail(KERNEL, "X", f"shape {(B, C_in, H, W_in)} with a {KH}x{KW} filter ({dname}): the smallest input "
             f"window needs {block_bytes(1)[1]} B per partition, {free} B are left after the weights",
             "fewer input channels or a narrower image")
    G = 1
    while G < n_rt and block_bytes(G + 1)[0] <= X_TILE_TARGET and block_bytes(G + 1)[1] <= free:
        G += 1
    G = _cdiv(n_rt, _cdiv(n_rt, G))          # balance the blocks
    n_blk_full, tail_tiles = _tiles(n_rt_full, G)
    return _Plan(B=B, C_in=C_in, C_out=C_out, H=H, W_in=W_in, KH=KH, KW=KW, T=T, p=p, Hp=Hp, Wp=Wp,
                 dtype=X.dtype, isz=isz, chunks=chunks, nr=nr, n_rt_full=n_rt_full, last_rows=last_rows,
                 G=G, n_blk_full=n_blk_full, tail_tiles=tail_tiles, n_ci_full=n_ci_full, ci_rem=ci_rem,
                 n_ci=n_ci, n_co=n_co, co_rem=co_rem, kp=kp, mp=mp, groups=groups,
                 tg=max(1, PSUM_BANK_BYTES // (mp * isz)))


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    """Valid stride-1 conv2d + per-channel bias + non-overlapping max-pool, fused on chip.

    Conv results never leave the chip: each PSUM tile gets its bias and pooling as it is
    evicted (ScalarE drains PSUM with the bias fused; for pool > 1 GpSimd then max-pools the
    SBUF copy), and only the pooled output is written to HBM.

    Layout:
        X     (B, C_in, H, W) HBM, row-major.  On chip an input window is
              (C_in tile [partition], n_ci, rows, cols): channels on the partition axis.
        W     (C_out, C_in, KH, KW) HBM.  Loaded with C_out on the partition axis, then
              transposed on TensorE to the stationary layout wT (C_in tile [partition], n_ci,
              KH*KW, C_out group) kept resident in SBUF.
        bias  (C_out,) HBM; on chip (C_out tile [partition], n_co) (one column per tile).
        pool_size  Python int 1..4: pooling window = stride.
        returns (B, C_out, (H-KH+1)//pool_size, (W-KW+1)//pool_size) HBM (shared_hbm) in
              X's dtype.  Conv rows/cols past a multiple of pool_size are not computed.

    Tiling:
        TILE_K = TILE_M = 128: C_in / C_out per tile (partition limit; stationary <= 128x128).
        PSUM tile = (C_out tile, nr rows, cw cols) fp32 with nr*cw <= 512 (one 2 KiB bank),
        nr and cw multiples of pool_size so each tile pools on its own.  Rows wider than
        cmax = (512 // p) // p * p conv columns (512 for p=1, 256 for p=2) are split into
        balanced column chunks, each with its own input window (KW-1 column halo).
        Row blocks of G row tiles: the input window is rows [r0, r0 + G*nr + KH - 1) (a KH-1
        halo, reloaded), so 224x224 images never need to fit whole; G is the largest with
        <= 32 KiB per C_in tile per window and double buffering inside the SBUF left over.
        Each window is loaded in up to three row pieces, rows [0, nr+KH-1), [.., 4nr+KH-1)
        and the rest, each piece for all C_in tiles (one DMA per C_in tile and piece), so the
        first PSUM tile waits only for the first piece.
        Loop nest (resident at each level):
          L0 C_out group: wT for the group (<= 112 KiB/partition; one group when it fits,
             e.g. 256x256x3x3 fp32 = 18 KiB) + bias for all C_out.
          L1 image b (affine)  L2 row block (affine) + static tail block
          L3 column chunk (static; one unless W_out is wide): input window for all C_in tiles.
          L4 C_out tile (affine): output staging tile (C_out tile, rows/p, cols/p), X dtype.
          L5 row tile (affine): one PSUM bank (4 rotating, so TensorE fills the next bank while
             this one drains); L6 C_in tile x kh x kw (affine) matmuls accumulate into it
             (PSUM accumulation over C_in AND taps).  Pool > 1: per row tile an SBUF eviction
             tile (C_out tile, nr, cw) and a row-max tile (C_out tile, nr/p, cw), X dtype.
        Partial C_in / C_out tiles and the last row tile run as separate static code, so
        every affine loop index is used only in affine index arithmetic.

    Constraints (raise ValueError before any instruction):
        ranks 4/4/1 with no empty dim; float32/float16/bfloat16, all three the same;
        W.shape[1] == C_in; len(bias) == C_out; pool_size an int (not bool) in 1..4 and
        <= both conv output sizes; KH <= H and KW <= W; resident weights of one 128-channel
        C_out tile, ceil(C_in/128) * KH*KW * 128 * itemsize, <= 112 KiB per partition
        (fp32 3x3: C_in <= 3072; fp32 7x7: C_in <= 512; larger C_out is split into groups,
        re-streaming the input once per group); the smallest input window (one row tile +
        halo, all C_in tiles, double buffered) must fit the SBUF left over (after, for
        pool > 1, 4 x 1024 elements of eviction temporaries).  GpSimd only touches SBUF.
        Tested in the interpreter: C_in 1..512 and C_out 1..385 (incl. 127, 129, 130, 300),
        filters 1x1, 2x2, 3x3, 3x4, 3x5, 5x3, 5x5, 7x7, pool 1..4 with remainders, W_out = 600
        (column chunks), batch 1..4, images up to 224x224 (7 row blocks), fp32/fp16/bf16.

    Numerics:
        Inputs in X's dtype go straight to TensorE; products accumulate in fp32 PSUM over
        C_in and all taps.  The eviction adds the bias in fp32 and rounds once to X's dtype;
        pool > 1 then takes maxima of those rounded values.  fp32 addition and rounding are
        monotone, so max(round(x + b)) == round(max(x) + b) bit for bit: the same result as
        pooling in fp32 first and rounding last.  Expected error vs the float64 oracle: fp32
        ~1e-6 relative; fp16/bf16 one output rounding plus fp32 accumulation (conftest
        TOLERANCE).

    Pseudocode:
        for group of C_out tiles:
            for co, ci, tap-group: wT[:, ci, taps, co] = copy(nc_transpose(W[co, ci, kh, kw]))
            for b, row block, column chunk:
                x = dma(X[b, :, rows + halo, cols + halo])    # per row piece, per C_in tile
                for co in group:
                    for row tile rt:
                        ps = zeros(PSUM)                                 # (co, nr, cw) fp32
                        for ci, kh, kw: ps += nc_matmul(wT[:, ci, kh*KW+kw, co],
                                                        x[:, ci, rt*nr+kh :, kw :])
                        e = activation(copy, ps, bias[co], dtype=X.dtype)        # ScalarE
                        if p == 1: o[:, rows] = e
                        else:      m = max_j e[:, i*p + j, :]   (p-1 tensor_tensor, GpSimd)
                                   o[:, rows/p] = max_j m[:, :, c*p + j]  (p-1, GpSimd)
                    dma(out[b, co, rows/p, cols/p], o)

    Cost notes:
        TensorE-bound: per image and C_out tile, ceil(C_in/128)*KH*KW matmuls per PSUM tile,
        each a full 128x128 stationary against nr x cw <= 512 moving columns (2 x 222 = 444 for
        the CS149 224x224 image).  256->256 3x3 224x224: 2*111*18 = 3,996 matmuls per image,
        every moving column a useful output, so TensorE time is the roofline floor (739 us
        fp16 / 2,957 us fp32 per image at max(N, 64) cycles per matmul).  Per PSUM tile the
        eviction is one ScalarE activation of <= 512 elements (~11% of the tile's fp16
        TensorE time), plus for pool > 1 2(p-1) GpSimd maxima on SBUF (~22% for p = 2).
        Engine placement matters more than engine time: queues are in order, and VectorE
        zeroes each PSUM bank (nl.zeros) just before its matmuls, so any VectorE instruction
        that waits for TensorE (the former VectorE max-reduce of PSUM) holds back the next
        bank's memset and with it TensorE (cost-model estimate: fp16 pool 2 1,026 us that way
        vs 764 us now; 1,344 us with the maxima on VectorE behind a ScalarE eviction).
        Input DMAs move <= 32 KiB contiguous per partition per C_in tile (~20 us per 32-row
        block vs ~400 us fp32 / ~100 us fp16 of matmuls), double buffered, in three row pieces
        (row tile 0, row tiles 1-3, the rest) so the first block starts after ~1 us of input
        instead of a whole window (~15 us saved per call, estimate).  Weight transposes:
        ceil(C_in/128)*ceil(C_out/128)*KH*KW (36 for 256x256x3x3), once per call; they and
        the 2.4 MB weight load dominate the small 32x16 CS149 case, which is overhead-bound.
    """
    pl = _plan(X, W, bias, pool_size)

    out = nl.ndarray((pl.B, pl.C_out, pl.Hp, pl.Wp), dtype=X.dtype, buffer=nl.shared_hbm)

    # bias: one column per C_out tile (tiny DMAs, once)
    bias_sb = nl.ndarray((pl.mp, pl.n_co), dtype=bias.dtype, buffer=nl.sbuf)
    for j in nl.static_range(pl.n_co):
        cs = min(TILE_M, pl.C_out - j * TILE_M)
        nisa.dma_copy(dst=bias_sb[0:cs, j:j + 1], src=bias[j * TILE_M:j * TILE_M + cs])

    for grp in pl.groups:
        wT = _prepare_weights(W, pl, grp)
        blk_rows = pl.G * pl.nr
        for b in nl.affine_range(pl.B):
            for blk in nl.affine_range(pl.n_blk_full):
                _conv_block(X, out, wT, bias_sb, pl, grp, b, blk * blk_rows, blk * (blk_rows // pl.p), pl.G, 0)
            if pl.tail_tiles or pl.last_rows:
                r0 = pl.n_blk_full * blk_rows
                _conv_block(X, out, wT, bias_sb, pl, grp, b, r0, r0 // pl.p, pl.tail_tiles, pl.last_rows)
    return out


def _prepare_weights(W, pl, grp):
    """Load this group's W rows (C_out on partitions) and transpose every tap on TensorE
    into the resident stationary layout wT (C_in tile, n_ci, KH*KW, group C_out)."""
    t0, n_full, rem = grp
    n_tiles = n_full + (1 if rem else 0)
    width = n_full * TILE_M + rem
    wT = nl.ndarray((pl.kp, pl.n_ci, pl.T, width), dtype=W.dtype, buffer=nl.sbuf)
    for jt in nl.static_range(n_tiles):
        co0 = (t0 + jt) * TILE_M
        cs_o = min(TILE_M, pl.C_out - co0)
        for ci in nl.static_range(pl.n_ci):
            ci0 = ci * TILE_K
            cs_i = min(TILE_K, pl.C_in - ci0)
            raw = nl.ndarray((cs_o, cs_i, pl.KH, pl.KW), dtype=W.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=raw, src=W[co0:co0 + cs_o, ci0:ci0 + cs_i, :, :])
            for g0 in nl.static_range(0, pl.T, pl.tg):
                gn = min(pl.tg, pl.T - g0)
                pt = nl.ndarray((cs_i, gn, cs_o), dtype=W.dtype, buffer=nl.psum)
                for j in nl.static_range(gn):
                    kh, kw = divmod(g0 + j, pl.KW)
                    pt[:, j, :] = nisa.nc_transpose(raw[:, :, kh, kw])
                wT[0:cs_i, ci, g0:g0 + gn, jt * TILE_M:jt * TILE_M + cs_o] = nisa.tensor_copy(pt)
    return wT


def _conv_block(X, out, wT, bias_sb, pl, grp, b, r0, rp0, n_tiles, last_rows):
    """One image, one row block of n_tiles full row tiles (+ a partial one of last_rows):
    load the input window (with its KH-1 halo) per column chunk, then every C_out tile."""
    rows = n_tiles * pl.nr + last_rows
    rin = rows + pl.KH - 1
    # Window rows in up to three pieces (row tile 0, row tiles 1..3, the rest), each for all
    # C_in tiles before the next: the first PSUM tile waits for ~nr+KH-1 rows, not the whole
    # window, which matters for the first block (later blocks are prefetched anyway).
    cuts = sorted({0, rin} | {min(rin, k * pl.nr + pl.KH - 1) for k in (1, 4)})
    for c0, cw in pl.chunks:
        win = cw + pl.KW - 1
        x_sb = nl.ndarray((pl.kp, pl.n_ci, rin, win), dtype=X.dtype, buffer=nl.sbuf)
        for ra, rb in zip(cuts[:-1], cuts[1:]):
            for ci in nl.affine_range(pl.n_ci_full):
                nisa.dma_copy(dst=x_sb[:, ci, ra:rb, :],
                              src=X[b, ci * TILE_K:ci * TILE_K + TILE_K, r0 + ra:r0 + rb, c0:c0 + win])
            if pl.ci_rem:
                nisa.dma_copy(dst=x_sb[0:pl.ci_rem, pl.n_ci_full, ra:rb, :],
                              src=X[b, pl.n_ci_full * TILE_K:pl.C_in, r0 + ra:r0 + rb, c0:c0 + win])
        t0, n_full, rem = grp
        for co in nl.affine_range(n_full):
            _co_tile(out, wT, bias_sb, x_sb, pl, b, t0, co, TILE_M, rp0, c0, cw, n_tiles, last_rows)
        if rem:
            _co_tile(out, wT, bias_sb, x_sb, pl, b, t0, n_full, rem, rp0, c0, cw, n_tiles, last_rows)


def _co_tile(out, wT, bias_sb, x_sb, pl, b, t0, co, cs_o, rp0, c0, cw, n_tiles, last_rows):
    """All row tiles of one C_out tile in the current window; then one DMA of pooled rows."""
    p = pl.p
    rows_p = (n_tiles * pl.nr + last_rows) // p
    cwp = cw // p
    bcol = bias_sb[0:cs_o, t0 + co:t0 + co + 1]
    o_sb = nl.ndarray((cs_o, rows_p, cwp), dtype=pl.dtype, buffer=nl.sbuf)
    for rt in nl.affine_range(n_tiles):
        _psum_tile(o_sb, wT, bcol, x_sb, pl, co, cs_o, rt * pl.nr, rt * (pl.nr // p), pl.nr, cw)
    if last_rows:
        _psum_tile(o_sb, wT, bcol, x_sb, pl, co, cs_o, n_tiles * pl.nr, n_tiles * pl.nr // p, last_rows, cw)
    co0 = (t0 + co) * TILE_M
    nisa.dma_copy(dst=out[b, co0:co0 + cs_o, rp0:rp0 + rows_p, c0 // p:c0 // p + cwp], src=o_sb)


def _psum_tile(dst, wT, bcol, x_sb, pl, co, cs_o, rr, rrp, nrows, cw):
    """One PSUM bank: accumulate ceil(C_in/128) * KH * KW matmuls, then evict with bias
    (pool 1) or max-pool (pool > 1) into the staging tile ``dst``."""
    p = pl.p
    ps = nl.zeros((cs_o, nrows, cw), dtype=nl.float32, buffer=nl.psum)
    cols = co * TILE_M
    for ci in nl.affine_range(pl.n_ci_full):
        for kh in nl.affine_range(pl.KH):
            for kw in nl.affine_range(pl.KW):
                ps += nisa.nc_matmul(wT[:, ci, kh * pl.KW + kw, cols:cols + cs_o],
                                     x_sb[:, ci, rr + kh:rr + kh + nrows, kw:kw + cw])
    if pl.ci_rem:
        k = pl.ci_rem
        for kh in nl.affine_range(pl.KH):
            for kw in nl.affine_range(pl.KW):
                ps += nisa.nc_matmul(wT[0:k, pl.n_ci_full, kh * pl.KW + kw, cols:cols + cs_o],
                                     x_sb[0:k, pl.n_ci_full, rr + kh:rr + kh + nrows, kw:kw + cw])
    if p == 1:
        dst[:, rr:rr + nrows, :] = nisa.activation(op=nl.copy, data=ps, bias=bcol, dtype=pl.dtype)
        return
    # ScalarE drains the bank with the bias fused (PSUM -> SBUF, rounded to X's dtype), GpSimd
    # max-pools from SBUF: VectorE only zeroes PSUM, so no VectorE instruction waits for TensorE
    # and the next bank's memset never queues behind this bank's pooling.  Bit-identical to
    # round(max(x) + b): adding b and rounding are monotone, so they commute with max.
    ev = nisa.activation(op=nl.copy, data=ps, bias=bcol, dtype=pl.dtype)
    _max_pool(dst[:, rrp:rrp + nrows // p, :], ev, cs_o, nrows, cw, p)


def _max_pool(dst, ev, cs_o, nrows, cw, p):
    """dst (cs_o, nrows/p, cw/p) = max over p x p windows of the SBUF tile ev (cs_o, nrows, cw):
    p-1 GpSimd maxima over rows (unit-stride operands), then p-1 over columns (stride p)."""
    hp, wp = nrows // p, cw // p
    rows = ev.reshape((cs_o, hp, p, cw))
    m = nisa.tensor_tensor(rows[:, :, 0, :], rows[:, :, 1, :], op=nl.maximum, engine=nisa.gpsimd_engine)
    for j in range(2, p):
        m = nisa.tensor_tensor(m, rows[:, :, j, :], op=nl.maximum, engine=nisa.gpsimd_engine)
    cols = m.reshape((cs_o, hp, wp, p))
    if p == 2:
        dst[...] = nisa.tensor_tensor(cols[:, :, :, 0], cols[:, :, :, 1], op=nl.maximum, engine=nisa.gpsimd_engine)
        return
    c = nisa.tensor_tensor(cols[:, :, :, 0], cols[:, :, :, 1], op=nl.maximum, engine=nisa.gpsimd_engine)
    for j in range(2, p - 1):
        c = nisa.tensor_tensor(c, cols[:, :, :, j], op=nl.maximum, engine=nisa.gpsimd_engine)
    dst[...] = nisa.tensor_tensor(c, cols[:, :, :, p - 1], op=nl.maximum, engine=nisa.gpsimd_engine)
