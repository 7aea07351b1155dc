"""Fused conv2d + bias + max-pool (the CS149 Assignment 4 kernel, Fall 2025, trn2).

Entry point: :func:`fused_conv2d_maxpool` (``@nki.jit``).  The plan (:func:`plan_conv`,
pure Python, typed) proves the SBUF/PSUM budget before any instruction; the loop diagram
and the budget table are in ``conv2d_design.md`` next to this file.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from nki_kernels.backend import nisa, nki, nl
from nki_kernels.kernels import tiling as T
from nki_kernels.kernels._checks import check_float, check_rank, check_same_dtype, fail

KERNEL = "fused_conv2d_maxpool"

# -- tuning constants (ours; hardware limits come from kernels/tiling.py) ----------------
MAX_POOL = 4  # pool_size 1..4 (the interface's limit)
WEIGHT_BUDGET = 112 * 1024  # bytes/partition of resident transposed weights (one C_out group)
SBUF_RESERVE = 8 * 1024  # bytes/partition left to the compiler (alignment, spills, slack)
X_TILE_TARGET = 32 * 1024  # input window bytes/partition per C_in tile: big DMAs, early start
WINDOW_BUFFERS = 2  # input windows in flight (double buffering)
STAGING_BUFFERS = 2  # output staging tiles in flight
POOL_BUFFERS = 4  # pool > 1: fp32 pooled temporaries in flight
WEIGHT_STAGING_BUFFERS = 2  # raw (untransposed) weight tiles in flight during the weight setup
WEIGHT_PRELOAD_BUDGET = 32 * 1024  # all of a group's raw weights may be loaded up front if they fit


# ---- the plan: one frozen dataclass per concern --------------------------------------------


@dataclass(frozen=True)
class ConvGeometry:
    """Shapes of one call (validated)."""

    B: int  # images
    C_in: int  # input channels
    C_out: int  # output channels (filters)
    H: int  # input rows
    W: int  # input columns
    KH: int  # filter rows
    KW: int  # filter columns
    pool: int  # pooling window = stride (1 = no pooling)
    Hp: int  # pooled output rows = (H - KH + 1) // pool
    Wp: int  # pooled output columns
    dtype: str  # 'float32' | 'float16' | 'bfloat16' (X, W, bias and the output)
    isz: int  # bytes per element

    @property
    def taps(self) -> int:
        return self.KH * self.KW


@dataclass(frozen=True)
class ChannelTiles:
    """How channels map onto TensorE: C_in on the contraction (partition) axis, C_out on the
    stationary free axis."""

    ci_sizes: tuple  # partitions of each C_in tile: 128, ..., then the remainder
    co_width: int  # output channels per C_out tile (stationary free size, <= 128); below
    # 128 only when one 128-wide tile's weights would not fit SBUF
    co_sizes: tuple  # channels of each C_out tile (co_width, ..., remainder)
    groups: tuple  # ((first C_out tile, number of tiles), ...): tiles whose transposed
    # weights are resident together; the input is streamed once per group
    taps_per_bank: int  # weight transposes grouped into one 2 KiB PSUM bank
    preload: bool  # every raw weight tile of a group is loaded before the first transpose
    # (distinct tiles: no DMA waits for a transpose, none queues behind the
    # input windows); else WEIGHT_STAGING_BUFFERS rotating tiles

    @property
    def n_ci(self) -> int:
        return len(self.ci_sizes)

    @property
    def kp(self) -> int:
        return self.ci_sizes[0]

    @property
    def n_ci_full(self) -> int:
        return sum(1 for s in self.ci_sizes if s == T.PMAX)

    @property
    def ci_rem(self) -> int:
        return self.ci_sizes[-1] if self.ci_sizes[-1] != T.PMAX else 0


@dataclass(frozen=True)
class SpatialTiles:
    """How the conv output plane maps onto PSUM tiles and input windows."""

    chunks: tuple  # ((first conv column, columns), ...): widths multiples of pool, <= cmax
    nr: int  # conv rows per PSUM tile (multiple of pool; nr * chunk width <= 512 fp32)
    G: int  # full row tiles per input window (row block)
    n_blocks: int  # full row blocks (G row tiles each), run in an affine loop
    tail_tiles: int  # full row tiles of the last, partial block (static code)
    last_rows: int  # rows of the last, partial row tile (static code), 0 if none


@dataclass(frozen=True)
class SbufBudget:
    """Bytes per partition the plan holds live at its peak (every term counted with its ring
    depth); ``total`` <= ``limit`` = SBUF_BYTES - SBUF_RESERVE is proven before any instruction."""

    weights: int  # resident transposed weights of one C_out group
    weight_staging: int  # raw weight tiles during the setup (not live with the windows)
    bias: int  # one column per C_out tile
    windows: int  # input windows, WINDOW_BUFFERS deep
    staging: int  # output staging tiles, STAGING_BUFFERS deep
    pool_tmp: int  # pool > 1: fp32 column maxima and pooled tiles, POOL_BUFFERS deep
    results: int  # one instruction result (<= one PSUM bank, 2 KiB) on its way into a
    # tile: the compiler writes in place, the interpreter holds a copy
    limit: int  # SBUF_BYTES - SBUF_RESERVE

    @property
    def total(self) -> int:
        return (
            self.bias
            + self.weights
            + self.results
            + max(self.weight_staging, self.windows + self.staging + self.pool_tmp)
        )


@dataclass(frozen=True)
class ConvPlan:
    geo: ConvGeometry
    ch: ChannelTiles
    sp: SpatialTiles
    sbuf: SbufBudget


# ---- planning (pure Python, before any instruction) ------------------------------------------


def _geometry(X, W, bias, pool_size) -> ConvGeometry:
    B, C_in, H, W_in = check_rank(KERNEL, "X", X, 4, "(B, C_in, H, W)")
    C_out, C_in_w, KH, KW = check_rank(KERNEL, "W", W, 4, "(C_out, C_in, KH, KW)")
    (n_bias,) = check_rank(KERNEL, "bias", bias, 1, "(C_out,)")
    dname = check_float(KERNEL, "X", X)
    check_float(KERNEL, "W", W)
    check_float(KERNEL, "bias", bias)
    check_same_dtype(KERNEL, {"X": X, "W": W, "bias": bias})
    if C_in_w != C_in:
        fail(
            KERNEL,
            "W",
            f"W.shape[1] = {C_in_w} input channels but X.shape[1] = {C_in}",
            "W of shape (C_out, C_in, KH, KW) with C_in equal to X.shape[1]",
        )
    if n_bias != C_out:
        fail(
            KERNEL,
            "bias",
            f"{n_bias} values for C_out = {C_out} output channels",
            "bias of shape (C_out,) with C_out equal to W.shape[0]",
        )
    if isinstance(pool_size, bool) or not isinstance(pool_size, numbers.Integral):
        fail(KERNEL, "pool_size", f"{pool_size!r} of type {type(pool_size).__name__}", f"an int in 1..{MAX_POOL}")
    p = int(pool_size)
    if not 1 <= p <= MAX_POOL:
        fail(KERNEL, "pool_size", p, f"an int in 1..{MAX_POOL}")
    if KH > H or KW > W_in:
        fail(
            KERNEL,
            "W",
            f"a {KH}x{KW} filter for a {H}x{W_in} image",
            "KH <= H and KW <= W (no padding: pad the input before calling)",
        )
    H_out, W_out = H - KH + 1, W_in - KW + 1
    if H_out // p < 1 or W_out // p < 1:
        fail(KERNEL, "pool_size", f"{p} for a {H_out}x{W_out} conv output", "pool_size <= min(H - KH + 1, W - KW + 1)")
    return ConvGeometry(
        B=B,
        C_in=C_in,
        C_out=C_out,
        H=H,
        W=W_in,
        KH=KH,
        KW=KW,
        pool=p,
        Hp=H_out // p,
        Wp=W_out // p,
        dtype=dname,
        isz=T.itemsize(dname),
    )


def _weight_staging(geo: ConvGeometry, g: int) -> tuple:
    """(preload?, bytes/partition of raw weight tiles live during a group's weight setup)."""
    all_raw = g * geo.C_in * geo.taps * geo.isz
    if all_raw <= WEIGHT_PRELOAD_BUDGET:
        return True, all_raw
    return False, WEIGHT_STAGING_BUFFERS * min(geo.C_in, T.PMAX) * geo.taps * geo.isz


def _channel_tiles(geo: ConvGeometry, m: int, g: int) -> ChannelTiles:
    co_sizes = T.tile_sizes(geo.C_out, m)
    groups = tuple((t0, min(g, len(co_sizes) - t0)) for t0 in range(0, len(co_sizes), g))
    return ChannelTiles(
        ci_sizes=T.tile_sizes(geo.C_in, T.PMAX),
        co_width=m,
        co_sizes=co_sizes,
        groups=groups,
        taps_per_bank=max(1, T.PSUM_BANK_BYTES // (m * geo.isz)),
        preload=_weight_staging(geo, g)[0],
    )


def _window_bytes(geo: ConvGeometry, n_ci: int, rows: int, cw: int) -> int:
    """One input window (all C_in tiles) for `rows` conv rows of a `cw`-column chunk."""
    return n_ci * (rows + geo.KH - 1) * (cw + geo.KW - 1) * geo.isz


def _spatial(geo: ConvGeometry, n_ci: int, cmax: int, free: int):
    """Column chunks of <= cmax conv columns, row tiles filling one PSUM bank, and the
    largest row block (<= X_TILE_TARGET per C_in tile) whose windows + staging fit ``free``
    bytes; None if even one row tile does not fit."""
    p = geo.pool
    Hu, Wu = geo.Hp * p, geo.Wp * p  # conv rows/cols that reach the output
    n_cc = T.cdiv(Wu, cmax)
    cw = T.round_up(T.cdiv(Wu, n_cc), p)  # balanced chunks, multiples of p
    chunks = T.spans(Wu, cw)
    nr_max = min((T.PSUM_FMAX // cw) // p * p, Hu)
    nr = T.round_up(T.cdiv(Hu, T.cdiv(Hu, nr_max)), p)  # balanced row tiles, multiples of p
    n_rt_full, last_rows = T.split(Hu, nr)
    n_rt = n_rt_full + (1 if last_rows else 0)
    pool_tmp = POOL_BUFFERS * (nr * (cw // p) + (nr // p) * (cw // p)) * 4 if p > 1 else 0

    def parts(G):
        return (
            WINDOW_BUFFERS * _window_bytes(geo, n_ci, G * nr, cw),
            STAGING_BUFFERS * (G * nr // p) * (cw // p) * geo.isz,
        )

    def need(G):
        return sum(parts(G)) + pool_tmp

    if need(1) > free:
        return None
    G = 1
    while G < n_rt and _window_bytes(geo, 1, (G + 1) * nr, cw) <= X_TILE_TARGET and need(G + 1) <= free:
        G += 1
    G = T.cdiv(n_rt, T.cdiv(n_rt, G))  # balance the blocks
    n_blocks, tail_tiles = T.split(n_rt_full, G)
    sp = SpatialTiles(chunks=chunks, nr=nr, G=G, n_blocks=n_blocks, tail_tiles=tail_tiles, last_rows=last_rows)
    windows, staging = parts(G)
    return sp, windows, staging, pool_tmp


def _co_width_candidates(C_out: int) -> list:
    """C_out tile widths to try, widest first: 128 (a full PE array), then halves."""
    out, m = [], min(T.STATIONARY_FMAX, C_out)
    while m >= 1:
        out.append(m)
        m //= 2
    return out


def _cmax_candidates(p: int) -> list:
    """Conv columns per chunk to try, widest first: one PSUM bank holds >= p rows of them."""
    out, c = [], (T.PSUM_FMAX // p) // p * p
    while c >= p:
        out.append(c)
        c = (c // 2) // p * p
    return out


def plan_conv(X: Any, W: Any, bias: Any, pool_size: Any) -> ConvPlan:
    """Validate the arguments and choose the tiling; prove the SBUF budget.  Raises
    ValueError naming the argument and the limit; emits no instruction.

    Search, widest first: C_out tile width m (128, 64, ... : fewer output channels resident
    when one 128-wide tile's weights exceed WEIGHT_BUDGET), C_out tiles per weight group g
    (as many as fit WEIGHT_BUDGET, else 1), conv columns per chunk (one PSUM bank's worth,
    halved while the input window does not fit).  The first combination whose peak fits
    SBUF_BYTES - SBUF_RESERVE wins."""
    geo = _geometry(X, W, bias, pool_size)
    n_ci = T.cdiv(geo.C_in, T.PMAX)
    limit = T.SBUF_BYTES - SBUF_RESERVE
    for m in _co_width_candidates(geo.C_out):
        per_tile = n_ci * geo.taps * m * geo.isz
        if per_tile > WEIGHT_BUDGET:
            continue
        n_co = T.cdiv(geo.C_out, m)
        g_best = min(n_co, WEIGHT_BUDGET // per_tile)
        for g in sorted({g_best, 1}, reverse=True):
            weights, bias_b = g * per_tile, n_co * geo.isz
            raw = _weight_staging(geo, g)[1]
            free = limit - weights - bias_b - T.PSUM_BANK_BYTES
            if raw > free:
                continue
            for cmax in _cmax_candidates(geo.pool):
                got = _spatial(geo, n_ci, cmax, free)
                if got is None:
                    continue
                sp, windows, staging, pool_tmp = got
                ch = _channel_tiles(geo, m, g)
                budget = SbufBudget(
                    weights=weights,
                    weight_staging=raw,
                    bias=bias_b,
                    windows=windows,
                    staging=staging,
                    pool_tmp=pool_tmp,
                    results=T.PSUM_BANK_BYTES,
                    limit=limit,
                )
                T.kernel_assert(budget.total <= limit, KERNEL, f"SBUF plan {budget} over {limit} B")
                return ConvPlan(geo=geo, ch=ch, sp=sp, sbuf=budget)
    # nothing fits: name the limit (one output channel per tile and a p-column chunk)
    min_w = n_ci * geo.taps * geo.isz
    if min_w > WEIGHT_BUDGET:
        fail(
            KERNEL,
            "W",
            f"shape {(geo.C_out, geo.C_in, geo.KH, geo.KW)} {geo.dtype}: even one output channel "
            f"needs {min_w} B of resident weights per partition",
            f"ceil(C_in/128) * KH*KW * itemsize <= {WEIGHT_BUDGET} B (C_in <= "
            f"{WEIGHT_BUDGET // (geo.taps * geo.isz) * T.PMAX} for a {geo.KH}x{geo.KW} {geo.dtype} filter)",
        )
    fail(
        KERNEL,
        "X",
        f"shape {(geo.B, geo.C_in, geo.H, geo.W)} with a {geo.KH}x{geo.KW} filter ({geo.dtype}): "
        f"the smallest input window (all {n_ci} C_in tiles, {geo.pool + geo.KH - 1} rows x "
        f"{2 * geo.pool + geo.KW - 1} columns, x{WINDOW_BUFFERS}) does not fit the "
        f"{limit} B per partition left after the weights",
        "fewer input channels or a smaller filter",
    )


# ---- the kernel ----------------------------------------------------------------------------


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    """Valid stride-1 conv2d + per-channel bias + non-overlapping max-pool, fused on chip.

    Conv results never leave the chip: each PSUM tile gets its bias and pooling as it is
    evicted, and only the pooled output is written to HBM.

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

    Tiling (plan_conv; every size is a trace-time int; diagram in conv2d_design.md):
        C_in tiles of 128 partitions (contraction); C_out tiles of m <= 128 channels
        (stationary width; m < 128 only when a 128-wide tile's weights would exceed
        WEIGHT_BUDGET = 112 KiB per partition); groups of C_out tiles whose transposed
        weights stay resident (input re-streamed once per group).
        PSUM tile = (m, nr rows, cw cols) fp32 with nr*cw <= 512 (one 2 KiB bank), nr and cw
        multiples of pool_size; rows wider than one bank are split into column chunks.
        Row blocks of G row tiles per input window (KH-1 halo rows reloaded), G the largest
        with <= 32 KiB per C_in tile; windows double buffered; loaded in up to three row
        pieces so the first PSUM tile waits for one small piece only.
        Loop nest: C_out group (static) > image (affine) > row block (affine, + static tail)
        > column chunk (static) > C_out tile (affine, + static partial) > row tile (affine,
        + static partial) > C_in tile x kh x kw (affine) matmuls accumulating in one bank.
        Every affine_range has >= 1 iteration (empty loops are not emitted).

    Engines (documented ALU table, api/nki.api.shared.rst @ 49ee15c5; CS149 trn2 solutions):
        TensorE matmuls and weight transposes; VectorE zeroes each PSUM bank (nl.zeros) and,
        for pool > 1, max-pools straight out of PSUM in two tensor_reduce(max): the innermost
        axis of the bank viewed (m, nr, cw/p, p), then axis 2 of that fp32 result viewed
        (m, nr/p, p, cw/p) (a single non-innermost axis, as CS149 solutions ran on trn2);
        ScalarE adds the bias with one activation(copy, bias=) per tile -- on the PSUM tile
        for pool 1, on the p*p-times smaller pooled tile for pool > 1 (max(x) + b == max(x + b)
        for a per-channel b).  GpSimd is not used.  No flags: nothing here lacks public
        hardware evidence.

    Constraints (ValueError before any instruction, naming the argument and the limit):
        X/W/bias not arrays, ranks 4/4/1, an empty dim; dtype not float32/float16/bfloat16 or
        not all the same; W.shape[1] != C_in; len(bias) != C_out; pool_size not an int (bool
        excluded) in 1..4 or larger than a conv output size; KH > H or KW > W.
        Capacity: ceil(C_in/128) * KH*KW * itemsize <= 112 KiB per partition (one output
        channel's resident weights: fp32 3x3 C_in <= 407,680; fp32 7x7 C_in <= 74,880) and
        the smallest input window must fit; every other layer runs (narrower C_out tiles,
        narrower column chunks).  The plan's SBUF peak (SbufBudget.total) is <= 212,984 -
        8 KiB per partition, proven before the first instruction.
        Tested in the interpreter: see simulator_tests/test_conv2d.py (CS149 matrix, extended
        scope, and a shape grid up to C_in = C_out = 2048, filters to 7x7, all dtypes).

    Numerics:
        Inputs in X's dtype go straight to TensorE; products accumulate in fp32 PSUM over
        C_in and all taps.  Pool 1: ScalarE adds the bias in fp32 and rounds once to X's
        dtype.  Pool > 1: VectorE takes fp32 maxima (exact), ScalarE adds the bias and rounds once:
        round(max(x) + b), which equals max(round(x + b)) bit for bit (rounding and adding b
        are monotone).  Tolerance vs the float64 oracle: nki_kernels/tolerances.py.

    Pseudocode:
        for group of C_out tiles:
            for co, ci, tap-group: wT[:, ci, taps, co] = copy(nc_transpose(W[co, ci, kh, kw]))
            for b, row block, column chunk:
                x = dma(X[b, :, rows + halo, cols + halo])          # per row piece, per C_in tile
                for co in group, row tile rt:
                    ps = zeros(PSUM)                                  # (m, nr, cw) fp32
                    for ci, kh, kw: ps += nc_matmul(wT[:, ci, kh*KW+kw, co], x[:, ci, rt*nr+kh:, kw:])
                    if p == 1: o[:, rows] = activation(copy, ps, bias=b[co])             # ScalarE
                    else:      c = tensor_reduce(max, ps.reshape(m, nr, cw/p, p), axis=3)      # VectorE
                               mx = tensor_reduce(max, c.reshape(m, nr/p, p, cw/p), axis=2)   # VectorE
                               o[:, rows/p] = activation(copy, mx, bias=b[co])                # ScalarE
                dma(out[b, co, rows/p, cols/p], o)

    Cost notes (cost-model estimates, no hardware):
        TensorE-bound: per image and C_out tile, ceil(C_in/128)*KH*KW matmuls per PSUM tile,
        each a full 128x128 stationary against nr x cw <= 512 moving columns (2 x 222 = 444
        for the CS149 224x224 image): 3,996 matmuls per image for 256->256 3x3 (739 us fp16 /
        2,957 us fp32 at the TensorE peak).  Per PSUM tile VectorE zeroes the bank and (pool
        > 1) reduces it (~0.5 us vs ~3.3 us of fp16 matmuls); ScalarE's bias pass is one
        instruction per tile.  See the README bench table for the current estimates.
    """
    plan = plan_conv(X, W, bias, pool_size)
    geo = plan.geo
    out = nl.ndarray((geo.B, geo.C_out, geo.Hp, geo.Wp), dtype=X.dtype, buffer=nl.shared_hbm)
    bias_sb = _load_bias(bias, plan)
    for t0, n_tiles in plan.ch.groups:
        _conv_group(X, W, out, bias_sb, plan, t0=t0, n_tiles=n_tiles)
    return out


def _out_dtype(plan):
    """The output (and every rounding) dtype: X's."""
    return {"float32": nl.float32, "float16": nl.float16, "bfloat16": nl.bfloat16}[plan.geo.dtype]


def _load_bias(bias, plan):
    """bias_sb[:, j] = bias of C_out tile j (tiny DMAs, once)."""
    ch = plan.ch
    bias_sb = nl.ndarray((ch.co_width, len(ch.co_sizes)), dtype=bias.dtype, buffer=nl.sbuf)
    for j in nl.static_range(len(ch.co_sizes)):
        c0, cs = j * ch.co_width, ch.co_sizes[j]
        nisa.dma_copy(dst=bias_sb[0:cs, j : j + 1], src=bias[c0 : c0 + cs])
    return bias_sb


def _conv_group(X, W, out, bias_sb, plan, *, t0, n_tiles):
    """All images for the C_out tiles t0 .. t0+n_tiles-1 (a function: the group's resident
    weights die when it returns, so two groups' weights are never live together)."""
    geo, sp = plan.geo, plan.sp
    wT = _prepare_weights(W, plan, t0, n_tiles)
    blk_rows = sp.G * sp.nr
    for b in nl.affine_range(geo.B):
        if sp.n_blocks:
            for blk in nl.affine_range(sp.n_blocks):
                _conv_block(
                    X, out, wT, bias_sb, plan, b=b, t0=t0, n_co=n_tiles, r0=blk * blk_rows, n_rt=sp.G, last_rows=0
                )
        if sp.tail_tiles or sp.last_rows:
            _conv_block(
                X,
                out,
                wT,
                bias_sb,
                plan,
                b=b,
                t0=t0,
                n_co=n_tiles,
                r0=sp.n_blocks * blk_rows,
                n_rt=sp.tail_tiles,
                last_rows=sp.last_rows,
            )


def _prepare_weights(W, plan, t0, n_tiles):
    """Load the group's W rows (C_out on partitions) and transpose every tap on TensorE into
    the resident stationary layout wT (C_in tile, n_ci, KH*KW, group C_out).  With
    ch.preload every raw tile is loaded first (one named tile each); else raw tiles rotate."""
    geo, ch = plan.geo, plan.ch
    width = sum(ch.co_sizes[t0 : t0 + n_tiles])
    wT = nl.ndarray((ch.kp, ch.n_ci, geo.taps, width), dtype=W.dtype, buffer=nl.sbuf)
    raws = {}
    if ch.preload:
        for jt in nl.static_range(n_tiles):
            for ci in nl.static_range(ch.n_ci):
                raws[jt, ci] = _load_raw_weights(W, plan, t0 + jt, ci, name=f"w_raw_{jt}_{ci}")
    for jt in nl.static_range(n_tiles):
        for ci in nl.static_range(ch.n_ci):
            raw = raws.pop((jt, ci)) if ch.preload else _load_raw_weights(W, plan, t0 + jt, ci, name="w_raw")
            _transpose_weights(wT, raw, plan, jt, ci)
    return wT


def _load_raw_weights(W, plan, co_tile, ci, name):
    """raw (cs_o, cs_i, KH, KW) = W[C_out tile, C_in tile] (C_out on partitions)."""
    ch = plan.ch
    co0, cs_o = co_tile * ch.co_width, ch.co_sizes[co_tile]
    ci0, cs_i = ci * T.PMAX, ch.ci_sizes[ci]
    raw = nl.ndarray((cs_o, cs_i, plan.geo.KH, plan.geo.KW), dtype=W.dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=raw, src=W[co0 : co0 + cs_o, ci0 : ci0 + cs_i, :, :])
    return raw


def _transpose_weights(wT, raw, plan, jt, ci):
    """wT[:, ci, taps, C_out tile jt] = raw[:, :, kh, kw].T per tap, taps_per_bank per PSUM bank."""
    geo, ch = plan.geo, plan.ch
    m, tg = ch.co_width, ch.taps_per_bank
    cs_o, cs_i = raw.shape[0], raw.shape[1]
    for g0 in nl.static_range(0, geo.taps, tg):
        gn = min(tg, geo.taps - g0)
        pt = nl.ndarray((cs_i, gn, cs_o), dtype=raw.dtype, buffer=nl.psum)
        for j in nl.static_range(gn):
            kh, kw = divmod(g0 + j, geo.KW)
            pt[:, j, :] = nisa.nc_transpose(raw[:, :, kh, kw])
        wT[0:cs_i, ci, g0 : g0 + gn, jt * m : jt * m + cs_o] = nisa.tensor_copy(pt)


def _conv_block(X, out, wT, bias_sb, plan, *, b, t0, n_co, r0, n_rt, last_rows):
    """One image, one row block of n_rt full row tiles (+ a partial one of last_rows) starting
    at conv row r0: load the input window (with its KH-1 halo) per column chunk, then every
    C_out tile of the group."""
    geo, ch, sp = plan.geo, plan.ch, plan.sp
    rows = n_rt * sp.nr + last_rows
    rin = rows + geo.KH - 1
    # Window rows in up to three pieces (row tile 0, row tiles 1..3, the rest), each for all
    # C_in tiles before the next: the first PSUM tile waits for ~nr+KH-1 rows, not the whole
    # window, which matters for the first block (later blocks are prefetched anyway).
    cuts = sorted({0, rin} | {min(rin, k * sp.nr + geo.KH - 1) for k in (1, 4)})
    n_full = sum(1 for s in ch.co_sizes[t0 : t0 + n_co] if s == ch.co_width)
    co_rem = ch.co_sizes[t0 + n_co - 1] if n_full < n_co else 0
    for c0, cw in sp.chunks:
        win = cw + geo.KW - 1
        x_sb = nl.ndarray((ch.kp, ch.n_ci, rin, win), dtype=X.dtype, buffer=nl.sbuf)
        for ra, rb in zip(cuts[:-1], cuts[1:], strict=True):
            if ch.n_ci_full:
                for ci in nl.affine_range(ch.n_ci_full):
                    nisa.dma_copy(
                        dst=x_sb[:, ci, ra:rb, :],
                        src=X[b, ci * T.PMAX : (ci + 1) * T.PMAX, r0 + ra : r0 + rb, c0 : c0 + win],
                    )
            if ch.ci_rem:
                c = ch.n_ci_full
                nisa.dma_copy(
                    dst=x_sb[0 : ch.ci_rem, c, ra:rb, :],
                    src=X[b, c * T.PMAX : geo.C_in, r0 + ra : r0 + rb, c0 : c0 + win],
                )
        tile = dict(b=b, r0=r0, c0=c0, cw=cw, n_rt=n_rt, last_rows=last_rows)
        if n_full:
            for co in nl.affine_range(n_full):
                _co_tile(out, wT, bias_sb, x_sb, plan, t0=t0, co=co, cs_o=ch.co_width, **tile)
        if co_rem:
            _co_tile(out, wT, bias_sb, x_sb, plan, t0=t0, co=n_full, cs_o=co_rem, **tile)


def _co_tile(out, wT, bias_sb, x_sb, plan, *, t0, co, cs_o, b, r0, c0, cw, n_rt, last_rows):
    """All row tiles of one C_out tile in the current window; then one DMA of pooled rows."""
    geo, ch, sp = plan.geo, plan.ch, plan.sp
    p = geo.pool
    rows_p = (n_rt * sp.nr + last_rows) // p
    bcol = bias_sb[0:cs_o, t0 + co : t0 + co + 1]
    o_sb = nl.ndarray((cs_o, rows_p, cw // p), dtype=_out_dtype(plan), buffer=nl.sbuf)
    psum_tile = dict(o_sb=o_sb, wT=wT, bcol=bcol, x_sb=x_sb, plan=plan, co=co, cs_o=cs_o, cw=cw)
    if n_rt:
        for rt in nl.affine_range(n_rt):
            _psum_tile(rr=rt * sp.nr, ro=rt * (sp.nr // p), nrows=sp.nr, **psum_tile)
    if last_rows:
        _psum_tile(rr=n_rt * sp.nr, ro=n_rt * sp.nr // p, nrows=last_rows, **psum_tile)
    co0 = (t0 + co) * ch.co_width
    nisa.dma_copy(dst=out[b, co0 : co0 + cs_o, r0 // p : r0 // p + rows_p, c0 // p : c0 // p + cw // p], src=o_sb)


def _psum_tile(*, o_sb, wT, bcol, x_sb, plan, co, cs_o, cw, rr, ro, nrows):
    """One PSUM bank: accumulate ceil(C_in/128) * KH * KW matmuls over conv rows
    [rr, rr + nrows) of the window, then evict with bias (pool 1) or max-pool out of PSUM
    and add the bias to the pooled tile (pool > 1) into the staging tile ``o_sb`` at pooled row
    ``ro`` (rr // pool, given as rt * (nr // pool): an affine loop expression, where ``//`` of a
    loop index is not)."""
    geo, ch = plan.geo, plan.ch
    p = geo.pool
    ps = nl.zeros((cs_o, nrows, cw), dtype=nl.float32, buffer=nl.psum)
    cols = co * ch.co_width
    if ch.n_ci_full:
        for ci in nl.affine_range(ch.n_ci_full):
            for kh in nl.affine_range(geo.KH):
                for kw in nl.affine_range(geo.KW):
                    ps += nisa.nc_matmul(
                        wT[:, ci, kh * geo.KW + kw, cols : cols + cs_o],
                        x_sb[:, ci, rr + kh : rr + kh + nrows, kw : kw + cw],
                    )
    if ch.ci_rem:
        k, c = ch.ci_rem, ch.n_ci_full
        for kh in nl.affine_range(geo.KH):
            for kw in nl.affine_range(geo.KW):
                ps += nisa.nc_matmul(
                    wT[0:k, c, kh * geo.KW + kw, cols : cols + cs_o],
                    x_sb[0:k, c, rr + kh : rr + kh + nrows, kw : kw + cw],
                )
    if p == 1:
        o_sb[:, rr : rr + nrows, :] = nisa.activation(op=nl.copy, data=ps, bias=bcol, dtype=_out_dtype(plan))
        return
    # max-pool straight out of PSUM (VectorE, fp32), then the bias on the p*p-times smaller
    # result (ScalarE, one rounding): max(x) + b == max(x + b) for a per-channel b.
    # Columns first: the innermost axis of the bank viewed (m, nr, cw/p, p), the documented
    # form; then rows: axis 2 of the SBUF result viewed (m, nr/p, p, cw/p), the single
    # non-innermost axis CS149 solutions reduce on trn2 (the 2.26 docs allow neither axes
    # (2, 4) at once nor non-consecutive axes).
    cols = nisa.tensor_reduce(nl.max, ps.reshape((cs_o, nrows, cw // p, p)), axis=3, dtype=nl.float32)
    mx = nisa.tensor_reduce(nl.max, cols.reshape((cs_o, nrows // p, p, cw // p)), axis=2, dtype=nl.float32)
    o_sb[:, ro : ro + nrows // p, :] = nisa.activation(op=nl.copy, data=mx, bias=bcol, dtype=_out_dtype(plan))
