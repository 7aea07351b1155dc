"""Fused conv2d + bias + max-pool in NKI 0.7 (``import nki``): the NKI 0.7 generation of
``conv2d.py`` (the CS149 Assignment 4 kernel), same plan, limits, numerics and engines.

Shared with the 0.1 kernel: the input checks and the tiling plan
(:func:`nki_kernels.kernels.conv2d.plan_conv`: channel tiles, resident weight groups, PSUM
tiles of one bank, row blocks with their halo, the SBUF budget proven before any instruction),
computed on the host (``_nki07``), the oracle, the shapes and the tolerance table.  NKI 0.7 here:

- destination-first ISA calls; ``nc_matmul(..., accumulate=False)`` starts each PSUM tile
  (the first matmul to a PSUM location must overwrite: ``nc_matmul`` docstring), every later
  tap / C_in tile accumulates (no ``nl.zeros`` memset);
- the pooling reads its operands through access patterns (``.ap(pattern=[[partition step, P],
  [step, count], ...])``, the on-chip form nki-library's kernels use): the PSUM bank as
  (m, nr, cw/p, p), then the column maxima as (m, nr/p, cw/p, p) with the window rows last, so
  both ``tensor_reduce`` calls reduce the trailing free axis, the only form the 0.6 reference
  allows ("the last contiguous free dimension(s)"), and nothing is copied;
- bias columns are loaded with an access pattern (``bias.ap``), the output is allocated in
  ``nl.shared_hbm`` and returned, loops are Python ``range`` loops (unrolled at
  specialisation); kernel code keeps to ``range``/``len``/``min``/``append``/tuples, as
  nki-library's kernels do.

Engines (0.6 ISA reference): TensorE (matmuls, weight transposes), VectorE (``tensor_reduce``
max), ScalarE (``activation(copy, bias=)``), DMA.  No GpSimd, no construct behind a flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_kernels.backend import resolve
from nki_kernels.kernels._nki07 import HostEntry, host_spec
from nki_kernels.kernels.conv2d import plan_conv
from nki_kernels.kernels.tiling import PMAX

nki, nl, nisa = resolve("0.7").modules  # the real `nki` on a device, the interpreter elsewhere


@dataclass
class ConvTiling(nl.NKIObject):  # type: ignore[name-defined]  # nl: the resolved API module
    """The fields of ``conv2d.ConvPlan`` the kernel reads (ints and tuples of ints)."""

    B: int
    C_out: int
    KH: int
    KW: int
    pool: int
    Hp: int
    Wp: int
    co_width: int  # output channels per C_out tile (stationary free size)
    co_sizes: tuple  # channels of each C_out tile
    ci_sizes: tuple  # partitions of each C_in tile
    groups: tuple  # ((first C_out tile, tiles), ...) with resident weights together
    taps_per_bank: int  # weight transposes per PSUM bank
    chunks: tuple  # ((first conv column, columns), ...)
    nr: int  # conv rows per PSUM tile
    G: int  # full row tiles per input window
    n_blocks: int  # full row blocks
    tail_tiles: int  # full row tiles of the last, partial block
    last_rows: int  # rows of the last, partial row tile


def _tiling(plan) -> ConvTiling:
    g, ch, sp = plan.geo, plan.ch, plan.sp
    return ConvTiling(
        B=g.B,
        C_out=g.C_out,
        KH=g.KH,
        KW=g.KW,
        pool=g.pool,
        Hp=g.Hp,
        Wp=g.Wp,
        co_width=ch.co_width,
        co_sizes=ch.co_sizes,
        ci_sizes=ch.ci_sizes,
        groups=ch.groups,
        taps_per_bank=ch.taps_per_bank,
        chunks=sp.chunks,
        nr=sp.nr,
        G=sp.G,
        n_blocks=sp.n_blocks,
        tail_tiles=sp.tail_tiles,
        last_rows=sp.last_rows,
    )


def _prepare(X, W, bias, pool_size=1):
    """conv2d.py's checks and plan (same ValueErrors), on host-side descriptions of the inputs."""
    plan = plan_conv(host_spec(X), host_spec(W), host_spec(bias), pool_size)
    return (X, W, bias, _tiling(plan)), {}


# ---- the kernel -------------------------------------------------------------------------------


@nki.jit
def conv2d_kernel(X, W, bias, t):
    """The device kernel behind :data:`fused_conv2d_maxpool`; ``t`` is a ConvTiling."""
    out = nl.ndarray((t.B, t.C_out, t.Hp, t.Wp), dtype=X.dtype, buffer=nl.shared_hbm)
    bias_sb = _load_bias(bias, t)
    for t0, n_tiles in t.groups:
        _conv_group(X, W, out, bias_sb, t, t0, n_tiles)
    return out


def _load_bias(bias, t):
    """bias_sb[:, j] = the bias of C_out tile j: a (channels, 1) access pattern of ``bias``."""
    bias_sb = nl.ndarray((t.co_width, len(t.co_sizes)), dtype=bias.dtype, buffer=nl.sbuf)
    for j in range(len(t.co_sizes)):
        cs = t.co_sizes[j]
        nisa.dma_copy(dst=bias_sb[0:cs, j : j + 1], src=bias.ap(pattern=[[1, cs], [1, 1]], offset=j * t.co_width))
    return bias_sb


def _conv_group(X, W, out, bias_sb, t, t0, n_tiles):
    """All images for the C_out tiles t0 .. t0+n_tiles-1 (the group's weights die with it)."""
    wT = _prepare_weights(W, t, t0, n_tiles)
    blk_rows = t.G * t.nr
    for b in range(t.B):
        for blk in range(t.n_blocks):
            _conv_block(X, out, wT, bias_sb, t, b, t0, n_tiles, blk * blk_rows, t.G, 0)
        if t.tail_tiles or t.last_rows:
            _conv_block(X, out, wT, bias_sb, t, b, t0, n_tiles, t.n_blocks * blk_rows, t.tail_tiles, t.last_rows)


def _prepare_weights(W, t, t0, n_tiles):
    """W rows (C_out on partitions) transposed tap by tap on TensorE into the resident
    stationary layout wT (C_in tile [partition], n_ci, KH*KW, group C_out)."""
    taps, m, tg = t.KH * t.KW, t.co_width, t.taps_per_bank
    width = sum(t.co_sizes[t0 : t0 + n_tiles])
    wT = nl.ndarray((t.ci_sizes[0], len(t.ci_sizes), taps, width), dtype=W.dtype, buffer=nl.sbuf)
    for jt in range(n_tiles):
        co0, cs_o = (t0 + jt) * m, t.co_sizes[t0 + jt]
        for ci in range(len(t.ci_sizes)):
            ci0, cs_i = ci * PMAX, t.ci_sizes[ci]
            raw = nl.ndarray((cs_o, cs_i, t.KH, t.KW), dtype=W.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=raw, src=W[co0 : co0 + cs_o, ci0 : ci0 + cs_i, :, :])
            for g0 in range(0, taps, tg):
                gn = min(tg, taps - g0)
                pt = nl.ndarray((cs_i, gn, cs_o), dtype=W.dtype, buffer=nl.psum)
                for j in range(gn):
                    kh, kw = (g0 + j) // t.KW, (g0 + j) % t.KW
                    nisa.nc_transpose(dst=pt[:, j, :], data=raw[:, :, kh, kw])
                nisa.tensor_copy(dst=wT[0:cs_i, ci, g0 : g0 + gn, jt * m : jt * m + cs_o], src=pt)
    return wT


def _conv_block(X, out, wT, bias_sb, t, b, t0, n_co, r0, n_rt, last_rows):
    """One image, one row block (n_rt full row tiles + a partial one of last_rows rows) from
    conv row r0: per column chunk, load the window with its KH-1 halo rows in up to three
    row pieces (the first PSUM tile waits for the first piece only), then every C_out tile."""
    kp, n_ci = t.ci_sizes[0], len(t.ci_sizes)
    rows = n_rt * t.nr + last_rows
    rin = rows + t.KH - 1
    cuts = [0]  # 0 < nr + KH - 1 <= 4 nr + KH - 1, each capped at rin
    for k in (1, 4):
        c = min(rin, k * t.nr + t.KH - 1)
        if c > cuts[-1]:
            cuts.append(c)
    if rin > cuts[-1]:
        cuts.append(rin)
    for c0, cw in t.chunks:
        win = cw + t.KW - 1
        x_sb = nl.ndarray((kp, n_ci, rin, win), dtype=X.dtype, buffer=nl.sbuf)
        for piece in range(len(cuts) - 1):
            ra, rb = cuts[piece], cuts[piece + 1]
            for ci in range(n_ci):
                ci0 = ci * PMAX
                nisa.dma_copy(
                    dst=x_sb[0 : t.ci_sizes[ci], ci, ra:rb, :],
                    src=X[b, ci0 : ci0 + t.ci_sizes[ci], r0 + ra : r0 + rb, c0 : c0 + win],
                )
        for co in range(n_co):
            _co_tile(out, wT, bias_sb, x_sb, t, t0, co, b, r0, c0, cw, n_rt, last_rows)


def _co_tile(out, wT, bias_sb, x_sb, t, t0, co, b, r0, c0, cw, n_rt, last_rows):
    """All row tiles of one C_out tile in the current window; then one DMA of pooled rows."""
    p, cs_o = t.pool, t.co_sizes[t0 + co]
    rows_p = (n_rt * t.nr + last_rows) // p
    bcol = bias_sb[0:cs_o, t0 + co : t0 + co + 1]
    o_sb = nl.ndarray((cs_o, rows_p, cw // p), dtype=out.dtype, buffer=nl.sbuf)
    for rt in range(n_rt):
        _psum_tile(o_sb, wT, bcol, x_sb, t, co, cs_o, cw, rt * t.nr, t.nr)
    if last_rows:
        _psum_tile(o_sb, wT, bcol, x_sb, t, co, cs_o, cw, n_rt * t.nr, last_rows)
    co0 = (t0 + co) * t.co_width
    nisa.dma_copy(dst=out[b, co0 : co0 + cs_o, r0 // p : r0 // p + rows_p, c0 // p : c0 // p + cw // p], src=o_sb)


def _psum_tile(o_sb, wT, bcol, x_sb, t, co, cs_o, cw, rr, nrows):
    """One PSUM bank: ceil(C_in/128) * KH * KW matmuls over conv rows [rr, rr + nrows), then
    evict with the bias (pool 1) or max-pool out of PSUM and add the bias to the p*p-times
    smaller pooled tile (max(x) + b == max(x + b) for a per-channel b)."""
    p, cols = t.pool, co * t.co_width
    ps = nl.ndarray((cs_o, nrows, cw), dtype=nl.float32, buffer=nl.psum)
    first = True
    for ci in range(len(t.ci_sizes)):
        k = t.ci_sizes[ci]
        for kh in range(t.KH):
            for kw in range(t.KW):
                nisa.nc_matmul(
                    dst=ps,
                    stationary=wT[0:k, ci, kh * t.KW + kw, cols : cols + cs_o],
                    moving=x_sb[0:k, ci, rr + kh : rr + kh + nrows, kw : kw + cw],
                    accumulate=not first,
                )
                first = False
    if p == 1:
        nisa.activation(dst=o_sb[:, rr : rr + nrows, :], op=nl.copy, data=ps, bias=bcol)
        return
    # Columns: the bank as (channel, row, pooled column, p), reduce the innermost axis.
    wp = cw // p
    colmax = nl.ndarray((cs_o, nrows, wp), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(
        dst=colmax, op=nl.maximum, axis=3, data=ps.ap(pattern=[[nrows * cw, cs_o], [cw, nrows], [p, wp], [1, p]])
    )
    # Rows: colmax as (channel, pooled row, pooled column, row within the window), the window
    # rows last (stride wp), so this reduce is innermost as well.
    mx = nl.ndarray((cs_o, nrows // p, wp), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(
        dst=mx,
        op=nl.maximum,
        axis=3,
        data=colmax.ap(pattern=[[nrows * wp, cs_o], [p * wp, nrows // p], [1, wp], [wp, p]]),
    )
    nisa.activation(dst=o_sb[:, rr // p : (rr + nrows) // p, :], op=nl.copy, data=mx, bias=bcol)


fused_conv2d_maxpool = HostEntry(
    _prepare,
    conv2d_kernel,
    "fused_conv2d_maxpool",
    """Valid stride-1 conv2d + per-channel bias + non-overlapping max-pool (X (B, C_in, H, W),
    W (C_out, C_in, KH, KW), bias (C_out,), pool_size 1..4) -> (B, C_out, Hp, Wp) in X's
    dtype: the NKI 0.7 port of ``conv2d.fused_conv2d_maxpool`` (same plan, layout, limits
    and numerics; see its docstring and conv2d_design.md).""",
)
