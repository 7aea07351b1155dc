"""Blocked-softmax (flash) attention forward for trn2, NKI 0.1.

Entry point: :func:`flash_attention` (``@nki.jit``).  The loop diagram is in
``attention_design.md`` next to this file.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from nki_kernels.backend import nki, nisa, nl
from nki_kernels.kernels._checks import check_float, check_rank, check_same_dtype, fail

KERNEL = "flash_attention"

# -- tile constants (trn2, NeuronCore-v3) -------------------------------------------------
TILE_Q = 128            # query rows per tile = partitions of a score tile (nl.tile_size.pmax)
TILE_K = 128            # keys per P^T chunk = contraction of p @ v (nl.tile_size.pmax)
KEY_BLOCK = 512         # keys per score tile = moving free size = one fp32 PSUM bank (gemm_moving_fmax)
CHUNKS = KEY_BLOCK // TILE_K     # 4 P^T chunks per key block
STEP_BLOCKS = 2         # key blocks per online-softmax step (one rescale of acc / l per 1,024 keys)
GROUP_TILES = 4         # query tiles interleaved tile-fastest (one q load / q^T / store per group)
GROUP_TILES_FP32 = 2    # the same for fp32 (keeps the working set within SBUF_WORK)
NS = 6                  # ring depth (steps) of the per-tile running extreme / -m / alpha slots
RING_O = 4              # ring depth (items) of the evicted [o | l] tiles
KT_LOAD_BLOCKS = 2      # key blocks of 512 per K load DMA (setup)
RING_TRI = 2            # ring depth (masked items) of the fp32 SBUF copies of diagonal triangles
STATE_SETS = 2          # rotating per-group slot sets of the state (acc, ext, -m, alpha) and of q^T
SCORE_ITEMS = 3         # items whose score tiles (STEP_BLOCKS PSUM banks each) can be live at once
SCORE_ITEMS_FP32 = 2    # fp32: p^T of a block in PSUM is a whole bank, so one item fewer
RING_P, RING_PT = 8, 4  # ring depth (items) of p and of TensorE-made p^T, bf16/fp16 (2 KiB per item)
RING_P_FP32, RING_PT_FP32 = 2, 3   # the same for fp32 (4 KiB per item; no DMA transposes)
DMA_T = (4, 5)          # (a, b): a of every b full bf16/fp16 steps get p^T by DMA, the rest on TensorE
DMA_T_DRAIN = 1         # the head's last items get p^T on TensorE (shorter latency than a DMA in the drain)
EVICT_DVE = (0, 1)      # (a, b): a of every b TensorE-transposed blocks are evicted by VectorE, the rest ScalarE
# software-pipeline lags (items ahead of the p @ v stage) of the stages issued in one iteration
LAG_SCORES, LAG_EXTREME, LAG_EXP, LAG_PT, LAG_PV, LAG_UPDATE = 5, 4, 3, 2, 0, -1
MAX_D = 128             # head dim = contraction of q k^T (partitions of q^T / k^T): hard limit
SBUF_BYTES = 212984     # usable SBUF bytes per partition (nl.tile_size.total_available_sbuf_size)
SBUF_WORK = 48 * 1024   # per-partition head-room for the pipeline working set (~44 KiB bf16, ~32 KiB fp32)
TESTED_SEQ = 16384      # longest Sq / Sk the tests run (Sk beyond it is allowed while K^T, V fit SBUF)
MASK_FILL = 3.0e38      # |fill| of masked raw scores: finite, never a row's max, exp(scale*fill - m) == 0

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Plan:
    """All static (trace-time) sizes of one call; built by :func:`_plan` before any instruction."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _plan(q, k, v, causal, softmax_scale) -> _Plan:
    """Validate the arguments and choose the tiling.  Raises ValueError; emits no instruction."""
    B, H, Sq, D = check_rank(KERNEL, "q", q, 4, "(B, H, Sq, D)")
    Bk, Hk, Sk, Dk = check_rank(KERNEL, "k", k, 4, "(B, H, Sk, D)")
    Bv, Hv, Sv, Dv = check_rank(KERNEL, "v", v, 4, "(B, H, Sk, D)")
    dname = check_float(KERNEL, "q", q)
    check_float(KERNEL, "k", k)
    check_float(KERNEL, "v", v)
    check_same_dtype(KERNEL, {"q": q, "k": k, "v": v})
    for name, (b_, h_) in (("k", (Bk, Hk)), ("v", (Bv, Hv))):
        if (b_, h_) != (B, H):
            fail(KERNEL, name, f"batch/heads ({b_}, {h_}) but q has ({B}, {H})",
                 "q, k and v with the same B and H (no grouped-query broadcasting)")
    if (Dk, Dv) != (D, D):
        fail(KERNEL, "k, v", f"head dims q={D}, k={Dk}, v={Dv}", "one head dim D shared by q, k and v")
    if Sv != Sk:
        fail(KERNEL, "v", f"{Sv} keys/values but k has Sk = {Sk}", "k and v with the same sequence length Sk")
    if D > MAX_D:
        fail(KERNEL, "q", f"head dim D = {D}", f"D <= {MAX_D} (the partition axis of q^T and k^T)")
    if not isinstance(causal, (bool, np.bool_)):
        fail(KERNEL, "causal", f"{causal!r} of type {type(causal).__name__}", "True or False")
    if softmax_scale is None:
        scale = 1.0 / math.sqrt(D)
    else:
        if isinstance(softmax_scale, (bool, np.bool_)) or not isinstance(softmax_scale, numbers.Real):
            fail(KERNEL, "softmax_scale", f"{softmax_scale!r} of type {type(softmax_scale).__name__}",
                 "None (1/sqrt(D)) or a finite real number")
        scale = float(softmax_scale)
        if not math.isfinite(scale):
            fail(KERNEL, "softmax_scale", scale, "None (1/sqrt(D)) or a finite real number")
    isz = _ITEMSIZE[dname]
    n_kt = _cdiv(Sk, TILE_K)
    resident = Sk * isz + n_kt * (D + 1) * isz      # K^T (D partitions x Sk) + [V | 1] (128 x n_kt x D+1)
    budget = SBUF_BYTES - SBUF_WORK
    if resident > budget:
        fail(KERNEL, "k", f"Sk = {Sk}, D = {D}, {dname}: K^T and V need {resident} B per partition",
             f"Sk * itemsize + ceil(Sk/128) * (D + 1) * itemsize <= {budget} B (resident in SBUF; e.g. "
             f"Sk <= {budget * 128 // (isz * (128 + D + 1))} for D = {D})")
    return _Plan(B=B, H=H, Sq=Sq, Sk=Sk, D=D, dtype=q.dtype, isz=isz, causal=bool(causal), scale=scale,
                 n_kt=n_kt, n_kb_full=Sk // KEY_BLOCK, kb_tail=Sk % KEY_BLOCK,
                 n_q_full=Sq // TILE_Q, q_tail=Sq % TILE_Q)


@nki.jit
def flash_attention(q, k, v, causal=False, softmax_scale=None):
    """softmax(q k^T * scale [+ causal mask]) v with an online (blocked) softmax: 128-row query
    tiles against 512-key blocks, never an Sq x Sk buffer.

    Layout:
      q (B, H, Sq, D), k (B, H, Sk, D), v (B, H, Sk, D): HBM, one of fp32 / bf16 / fp16.
      returns (B, H, Sq, D) in q's dtype, HBM (nl.shared_hbm).
      On chip per head: K^T (D partitions x Sk) and [V | 1] (128 partitions = key within a
      128-key tile, ceil(Sk/128) tiles, D + 1: a ones column, so p @ [V | 1] also gives the row
      sums) resident in SBUF; per group of query tiles q, q^T, [o | l] accumulators.
    Tiling: (constants KEY_BLOCK=512, TILE_Q=TILE_K=128, STEP_BLOCKS=2, GROUP_TILES=4 (fp32 2);
             diagram in attention_design.md)
      L1 (b, h), affine: the first group's q DMA first, then K in DMAs of 1,024 keys (2 KiB
         contiguous rows per partition; K^T via 4 TensorE transposes per 512 keys into one
         PSUM tile + one VectorE copy that un-permutes the keys), the ones column of [V | 1]
         (GpSimd, before the V DMAs), V in 2 DMAs.
         Resident: K^T + [V | 1].
      L2 all (tile, softmax step) items of the head as ONE static software pipeline
         (_pipeline): groups of GROUP_TILES query tiles, items of a group interleaved
         tile-fastest, groups back to back with no fill / drain between them (a group's q DMA
         is issued one group ahead, its q^T made just before its first scores, each tile
         normalised right after its last step, one store DMA per group).  Per step of 2 key
         blocks (1,024 keys): two (128 x 512) fp32 score tiles in PSUM (3 items = 6 banks in
         rotation), p (128 x 1,024, input dtype) in an SBUF ring, p^T by one DMA transpose
         (4 of 5 full bf16/fp16 steps) or by 4 TensorE transposes per block + one ScalarE
         PSUM eviction, one (128 x D+1) fp32 PSUM accumulation group for p @ [V | 1].
         Causal: blocks above the diagonal are never visited; only the last block of a tile
         is trimmed, and only its <= 128-key triangle is masked (on an SBUF copy).
    Constraints:
      hard (ValueError before any instruction): rank 4; fp32/bf16/fp16, one dtype; equal B, H, D;
      k and v with equal Sk; D <= 128; K^T + [V | 1] resident:
      Sk*itemsize + ceil(Sk/128)*(D+1)*itemsize <= 163,832 B per partition (D=128: Sk <= 20,352
      fp32, 40,765 bf16/fp16); causal a bool; softmax_scale None (1/sqrt(D)) or a finite real
      (0 and negative allowed).
      tested: Sq, Sk in 1..4,096 incl. non-multiples of 128 and Sq != Sk (16,384 traced by hand);
      D in {1, 32, 64, 128}; B, H <= 2.
      hardware legality: PSUM at most 8 banks live (6 score banks, <= 2 p^T blocks of 1 KiB,
      <= 2 [o | l] tiles of 516 B; fp32: 4 score banks), every PSUM tile <= 2 KiB; GpSimd only
      touches SBUF (tested); every multi-matmul PSUM accumulation group starts from an
      nl.zeros PSUM tile and only uses += (score tiles are single matmuls, assigned);
      DMA transposes only for 2-byte dtypes, SBUF -> SBUF, 3-D (2, 1, 0).
    Numerics: q k^T and p v on TensorE in the input dtype, fp32 PSUM accumulation; row max, exp,
      acc, l and the final divide in fp32; p rounded to the input dtype before p v (as in
      FlashAttention) and l is the fp32 sum of those rounded p (the ones column of [V | 1]).
      Masked scores become -3e38 in an fp32 SBUF copy of the diagonal triangle (finite; +3e38
      for scale < 0, where the row extreme is a min);
      the running max starts at the first step's max (no -inf anywhere); the final divide uses
      max(l, 1e-30), so a row with no keys would give 0, not NaN.  Tolerance vs the float64
      oracle: the project table; bf16/fp16 within 2x a same-precision NumPy baseline.
    Pseudocode (per b, h):
      KT = transpose(k) (D x Sk); V1 = [v | 1] in 128-key tiles
      for each group of query tiles, for each query tile (rows r0..r0+n):
        QT = transpose(q[r0:r0+n])                             # D x n stationary
        for each step of <= 2 key blocks j (512 keys; causal: up to the diagonal):
          s_j = QT^T @ KT[:, j]                                # PSUM n x 512 fp32
          tri = where(row >= key, copy(s_j[:, u:]), -3e38)     # diagonal block only: VectorE
                                                               # copy to SBUF, GpSimd affine_select
          m_new = max(m, max_j rowmax(s_j))                    # VectorE per block (GpSimd for
                                                               # tri), GpSimd combine
          alpha = exp(scale*(m - m_new))                       # ScalarE
          p_j = exp(scale * s_j - scale * m_new)               # ScalarE, one instruction per block
          pT = transpose(p) (DMA, or TensorE -> PSUM -> SBUF)
          [o | l]_step = zeros; += pT[c]^T @ V1[j, c] per chunk  # one PSUM group n x (D+1)
          acc = alpha * acc + [o | l]_step;  m = m_new         # GpSimd (after a ScalarE eviction)
        out[r0:r0+n] = acc[:, :D] / max(acc[:, D], 1e-30)      # GpSimd
    Cost notes: (cost-model ESTIMATES, no hardware) per 128 x 512 block VectorE's fp32 row max
      from PSUM (~533 ns) and ScalarE's exp (~427 ns) are the floors; TensorE runs 1 q k^T +
      4 p v (+ 4 transposes on 1 block in 5); p^T by DMA costs ~0.7 us of all 16 DMA queues per
      block; the nl.zeros of each [o | l] group is a ~134 ns VectorE memset.  S=4096 D=128
      bf16: ~190 us non-causal, ~135 us causal (was 197 / 140); busy DVE ~158, DMA ~158,
      ACT ~151, PE ~127 us; see attention_design.md.
    """
    plan = _plan(q, k, v, causal, softmax_scale)
    out = nl.ndarray((plan.B, plan.H, plan.Sq, plan.D), plan.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(plan.B):
        for h in nl.affine_range(plan.H):
            _one_head(q, k, v, out, b, h, plan)
    return out


def _one_head(q, k, v, out, b, h, plan):
    """All query tiles of one (b, h) as ONE static software pipeline (no fill / drain between
    groups).  A function, so its resident K^T / V die with it."""
    D, Sk = plan.D, plan.Sk
    dt = plan.dtype
    G = GROUP_TILES if plan.isz == 2 else GROUP_TILES_FP32
    tiles = [(t * TILE_Q, TILE_Q) for t in range(plan.n_q_full)]
    if plan.q_tail:
        tiles.append((plan.n_q_full * TILE_Q, plan.q_tail))
    groups = [list(range(g0, min(g0 + G, len(tiles)))) for g0 in range(0, len(tiles), G)]
    # q of a group (double-buffered): the full tiles in one DMA, the partial tile in another
    q_all = nl.ndarray((TILE_Q, G, D), dt, buffer=nl.sbuf)
    i_p = nl.arange(TILE_Q)[:, None, None]
    i_d = nl.arange(D)[None, None, :]

    def load_q(gi):
        ts = groups[gi]
        nfull = sum(1 for t in ts if tiles[t][1] == TILE_Q)
        if nfull:
            i_t = nl.arange(nfull)[None, :, None]
            nisa.dma_copy(dst=q_all[:, 0:nfull, :], src=q[b, h, tiles[ts[0]][0] + i_t * TILE_Q + i_p, i_d])
        if nfull < len(ts):
            q0, qn = tiles[ts[-1]]
            nisa.dma_copy(dst=q_all[0:qn, len(ts) - 1, :], src=q[b, h, nl.ds(q0, qn), :])

    # the first group's q goes first on the DMA queue: its q^T is the first thing TensorE needs
    load_q(0)

    kT = nl.ndarray((D, Sk), dt, buffer=nl.sbuf)
    # V with a ones column: p @ [V | 1] puts the row sums of p next to p @ V in one PSUM group
    vt = nl.ndarray((TILE_K, plan.n_kt, D + 1), dt, buffer=nl.sbuf)

    # -- K^T, KT_LOAD_BLOCKS x 512 keys per DMA: partition p gets the nc consecutive rows
    #    kb0 + nc*p .. kb0 + nc*p + nc - 1 of k (one nc*D*itemsize-byte run: 2 KiB for bf16,
    #    D = 128, instead of 128 runs of 256 B: ~8x fewer DMA descriptors before the first
    #    scores).  Chunk c of that tile holds keys kb0 + nc*p + c; per 512 keys 4 TensorE
    #    transposes into one PSUM tile, and the VectorE eviction (idle before the pipeline)
    #    un-permutes them with a 16-byte-strided write into K^T
    kl = KT_LOAD_BLOCKS
    nc = kl * CHUNKS
    i_c = nl.arange(nc)[None, :, None]
    i_dk = nl.arange(D)[:, None, None]
    i_cc = nl.arange(CHUNKS)[None, :, None]
    i_pp = nl.arange(TILE_K)[None, None, :]
    n_kl, kb_left = divmod(plan.n_kb_full, kl)
    for j in nl.affine_range(n_kl):
        kb0 = j * kl * KEY_BLOCK
        k_nat = nl.load(k[b, h, kb0 + i_p * nc + i_c, i_d])
        for jb in nl.affine_range(kl):
            kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
            for c in nl.affine_range(CHUNKS):
                kT_ps[:, nl.ds(c * TILE_K, TILE_K)] = nisa.nc_transpose(k_nat[:, jb * CHUNKS + c, :])
            # column c*128 + p of kT_ps = key kb0 + nc*p + jb*CHUNKS + c
            kT[i_dk, kb0 + jb * CHUNKS + i_cc + nc * i_pp] = nisa.tensor_copy(
                kT_ps[i_dk, i_cc * TILE_K + i_pp], engine=nisa.vector_engine)
    if kb_left:
        kb0 = n_kl * kl * KEY_BLOCK
        i_c2 = nl.arange(kb_left * CHUNKS)[None, :, None]
        k_nat = nl.load(k[b, h, kb0 + i_c2 * TILE_K + i_p, i_d])
        for jb in nl.static_range(kb_left):
            kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
            for c in nl.affine_range(CHUNKS):
                kT_ps[:, nl.ds(c * TILE_K, TILE_K)] = nisa.nc_transpose(k_nat[:, jb * CHUNKS + c, :])
            kT[:, nl.ds(kb0 + jb * KEY_BLOCK, KEY_BLOCK)] = nisa.tensor_copy(kT_ps, engine=nisa.vector_engine)
    if plan.kb_tail:
        kb0 = plan.n_kb_full * KEY_BLOCK
        n_full, rem = divmod(plan.kb_tail, TILE_K)
        kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
        if n_full:
            i_c2 = nl.arange(n_full)[None, :, None]
            k_nat = nl.load(k[b, h, kb0 + i_c2 * TILE_K + i_p, i_d])
            for c in nl.static_range(n_full):
                kT_ps[:, c * TILE_K:(c + 1) * TILE_K] = nisa.nc_transpose(k_nat[:, c, :])
        if rem:
            r0 = kb0 + n_full * TILE_K
            k_rem = nl.load(k[b, h, r0:r0 + rem, :])
            kT_ps[:, n_full * TILE_K:plan.kb_tail] = nisa.nc_transpose(k_rem)
        kT[:, kb0:Sk] = nisa.tensor_copy(kT_ps[:, 0:plan.kb_tail], engine=nisa.vector_engine)
    kT_ps = k_nat = k_rem = None      # setup tiles die here (PSUM free for the pipeline)

    # ones column first: GpSimd is in order, so a memset queued behind the V DMAs would hold
    # back the pipeline's first running-max combines until all of V has landed
    vt[:, :, D:D + 1] = nisa.memset((TILE_K, plan.n_kt, 1), 1.0, dt, engine=nisa.gpsimd_engine)
    # -- V: tile t holds keys t*128 + p on partition p.  The first step's keys in one DMA (the
    #    first p @ v needs them soon), all other full tiles in a second, the partial tile alone.
    n_vfull, v_rem = divmod(Sk, TILE_K)
    first = min(n_vfull, STEP_BLOCKS * CHUNKS)
    for t0, t1 in ((0, first), (first, n_vfull)):
        if t1 > t0:
            i_t = nl.arange(t1 - t0)[None, :, None]
            nisa.dma_copy(dst=vt[:, t0:t1, 0:D], src=v[b, h, (t0 + i_t) * TILE_K + i_p, i_d])
    if v_rem:
        r0 = n_vfull * TILE_K
        nisa.dma_copy(dst=vt[0:v_rem, n_vfull, 0:D], src=v[b, h, r0:Sk, :])

    _pipeline(q_all, load_q, out, kT, vt, b, h, tiles, groups, plan)


def _key_steps(k_end: int, masked_last: bool) -> list:
    """Static schedule of one query tile: softmax steps of up to STEP_BLOCKS key blocks of 512,
    each block (kb0, width, masked).  Trace-time Python, no instruction."""
    blocks = [[kb0, min(KEY_BLOCK, k_end - kb0), False] for kb0 in range(0, k_end, KEY_BLOCK)]
    blocks[-1][2] = masked_last
    return [[tuple(x) for x in blocks[i:i + STEP_BLOCKS]] for i in range(0, len(blocks), STEP_BLOCKS)]


def _interleave(n_steps: list) -> list:
    """(tile, step) items, step-major: tile 0 step 0, tile 1 step 0, tile 0 step 1, ..."""
    return [(t, j) for j in range(max(n_steps)) for t in range(len(n_steps)) if j < n_steps[t]]


def _dma_steps(plan, items, steps, tcs) -> set:
    """Items whose p^T is made by one DMA transpose (SBUF -> SBUF) instead of TensorE transposes
    + PSUM evictions: 2-byte dtypes, full 128-row tiles and full steps of STEP_BLOCKS x 512
    keys, and of those DMA_T[0] of every DMA_T[1], so that the DMA queues, TensorE and the
    PSUM-evicting engines (VectorE, ScalarE) share the work.  The head's last DMA_T_DRAIN
    items are left to TensorE: in the drain a DMA transpose's latency (~2.5 us, cost-model
    estimate) is exposed.  Trace-time Python."""
    if plan.dtype == np.float32:
        return set()
    out, cnt = set(), 0
    last_dma = len(items) - DMA_T_DRAIN
    for i, it_ in enumerate(items):
        if it_ is None:
            continue
        t, j = it_
        blocks = steps[t][j]
        if i >= last_dma:
            break
        if tcs[t].qn == TILE_Q and len(blocks) == STEP_BLOCKS and all(w == KEY_BLOCK for _, w, _ in blocks):
            a, b = DMA_T
            if (cnt * a) // b != ((cnt + 1) * a) // b:
                out.add(i)
            cnt += 1
    return out


class _Tile:
    """Per-query-tile context (trace-time record; the on-chip state lives in the head's group
    tensors, indexed by the tile's state slot)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _pipeline(q_all, load_q, out, kT, vt, b, h, tiles, groups, plan):
    """Query tiles [(q0, qn), ...] of one head (only the last may be partial), in groups of
    GROUP_TILES: online softmax over the key blocks each sees.  Rows q0..q0+qn-1 of a tile see
    keys < Sk (causal: < min(Sk, q0 + qn)).

    All (tile, step) items of the head run as ONE software pipeline in program order: the
    items of a group are interleaved tile-fastest, groups follow each other, and iteration i
    issues stage s of item i + LAGS[s] (scores, row extremes, exp, p^T, p @ v, acc update),
    so every in-order engine queue holds independent work while an item's dependency chain
    runs, also across group boundaries (a group's q^T is made just before its first scores,
    its outputs are stored right after its last acc update).  The per-tile state of a group
    lives in one of STATE_SETS rotating slot sets; trace-time asserts check that a set is
    reused only after the group that held it has finished."""
    D, dt = plan.D, plan.dtype
    G = GROUP_TILES if plan.isz == 2 else GROUP_TILES_FP32
    qmax, ns = TILE_Q, STATE_SETS * G
    # group state (fp32): [o | l] accumulators; per tile and step ring slots (NS deep) of the
    # running extreme (column 0), the step's block extremes (1..STEP_BLOCKS) and the extreme of
    # a masked diagonal triangle (STEP_BLOCKS + 1), -m and alpha
    acc = nl.ndarray((qmax, ns, D + 1), nl.float32, buffer=nl.sbuf)
    ext = nl.ndarray((qmax, ns, NS, STEP_BLOCKS + 2), nl.float32, buffer=nl.sbuf)
    neg_m = nl.ndarray((qmax, ns, NS), nl.float32, buffer=nl.sbuf)
    alpha = nl.ndarray((qmax, ns, NS), nl.float32, buffer=nl.sbuf)
    # per item ring buffers (static slots): p (exp output), p^T of TensorE-transposed blocks,
    # evicted [o | l], masked diagonal triangles (fp32 SBUF copies of their scores)
    sw = STEP_BLOCKS * KEY_BLOCK
    ring, ring_t = (RING_P, RING_PT) if plan.isz == 2 else (RING_P_FP32, RING_PT_FP32)
    p_ring = nl.ndarray((qmax, ring, sw), dt, buffer=nl.sbuf)
    pT_ring = nl.ndarray((TILE_K, ring_t, STEP_BLOCKS * CHUNKS, qmax), dt, buffer=nl.sbuf)
    o_ring = nl.ndarray((qmax, RING_O, D + 1), nl.float32, buffer=nl.sbuf)
    tri_ring = nl.ndarray((qmax, RING_TRI, TILE_K), nl.float32, buffer=nl.sbuf)
    # PSUM score banks: SCORE_ITEMS items x STEP_BLOCKS blocks of (128 x 512) fp32, one bank
    # each, reused in rotation (a bank is rewritten once the exp of its previous block read it)
    n_si = SCORE_ITEMS if plan.isz == 2 else SCORE_ITEMS_FP32
    s_banks = [nl.ndarray((qmax, KEY_BLOCK), nl.float32, buffer=nl.psum) for _ in range(n_si * STEP_BLOCKS)]
    qT_all = nl.ndarray((D, STATE_SETS, G, qmax), dt, buffer=nl.sbuf)
    o_all = nl.ndarray((qmax, G, D), dt, buffer=nl.sbuf)

    # -- static schedule (trace-time Python)
    # lags: a score bank is rewritten only after the exp that read it (n_si items in flight)
    lag_s = min(LAG_SCORES, LAG_EXP + n_si - 1)
    lag_x = min(LAG_EXTREME, lag_s)
    tcs, steps, items, g_first, g_last = [], [], [], [], []
    for gi, ts in enumerate(groups):
        # group-state hazard: group gi reuses the slot set of group gi - STATE_SETS, whose last
        # access is its epilogue (iteration g_last - LAG_UPDATE); gi's first access is its
        # prologue (iteration g_first - lag_s).  Short groups (few key steps): pad with empty
        # items (a pipeline bubble) until the first comes after the last.
        if gi >= STATE_SETS:
            while len(items) - lag_s <= g_last[gi - STATE_SETS] - LAG_UPDATE:
                items.append(None)
        for tl, t in enumerate(ts):
            q0, qn = tiles[t]
            if plan.causal:
                k_end = min(plan.Sk, q0 + qn)    # key j is masked for row i iff j > i
                masked = k_end - 1 > q0
            else:
                k_end, masked = plan.Sk, False
            tcs.append(_Tile(t=t, tl=tl, gi=gi, q0=q0, qn=qn, slot=(gi % STATE_SETS) * G + tl,
                             qT=qT_all[:, gi % STATE_SETS, tl, 0:qn]))
            steps.append(_key_steps(k_end, masked))
        g_first.append(len(items))
        items += [(ts[t], j) for t, j in _interleave([len(steps[t]) for t in ts])]
        g_last.append(len(items) - 1)
    n = len(items)
    dma = _dma_steps(plan, items, steps, tcs)
    pe_slot, tri_slot = {}, {}
    for i, it_ in enumerate(items):
        if it_ is None:
            continue
        t, j = it_
        if i not in dma:
            pe_slot[i] = len(pe_slot) % ring_t
        if steps[t][j][-1][2]:
            tri_slot[i] = len(tri_slot) % RING_TRI
    st = dict(acc=acc, ext=ext, neg_m=neg_m, alpha=alpha, p_ring=p_ring, pT_ring=pT_ring, o_ring=o_ring,
              tri_ring=tri_ring, kT=kT, vt=vt, plan=plan, ring=ring, dma=dma, pe_slot=pe_slot,
              tri_slot=tri_slot, s_banks=s_banks, n_si=n_si, n_evict=0)
    live = {}

    # ring hazards (trace-time): each ring slot is rewritten only after its last reader
    assert ring > LAG_EXP - LAG_PT and ring_t > LAG_PT - LAG_PV and RING_O > LAG_PV - LAG_UPDATE
    assert NS > LAG_EXP - LAG_UPDATE + 1 and lag_x >= LAG_EXP and RING_TRI > lag_x - LAG_EXP
    for gi in range(STATE_SETS, len(groups)):
        assert g_first[gi] - lag_s > g_last[gi - STATE_SETS] - LAG_UPDATE, gi

    stages = [(_stage_scores, lag_s), (_stage_extreme, lag_x), (_stage_exp, LAG_EXP),
              (_stage_pT, LAG_PT), (_stage_pv, LAG_PV), (_stage_update, LAG_UPDATE)]
    lo = min(lag for _, lag in stages)
    hi = max(lag for _, lag in stages)
    prologue = {g_first[gi] - lag_s: gi for gi in range(len(groups))}
    epilogue = {g_last[gi] - LAG_UPDATE: gi for gi in range(len(groups))}
    # a tile's output is normalised right after its last acc update (spread over the group's
    # last items instead of a burst of GpSimd work at the group's end)
    last_item = {}
    for i, it_ in enumerate(items):
        if it_ is not None:
            last_item[it_[0]] = i
    tile_done = {i - LAG_UPDATE: t for t, i in last_item.items()}
    for it in nl.static_range(-hi, n - lo):
        if it in prologue:
            gi = prologue[it]
            for t in groups[gi]:
                tc = tcs[t]
                tc.qT[...] = nisa.tensor_copy(nisa.nc_transpose(q_all[0:tc.qn, tc.tl, :]), engine=nisa.vector_engine)
            if gi + 1 < len(groups):
                load_q(gi + 1)          # one group ahead (q is dead once q^T is made)
        for fn, lag in stages:
            i = it + lag
            if 0 <= i < n and items[i] is not None:
                t, j = items[i]
                fn(st, live, i, tcs[t], j, steps[t][j])
        if it in tile_done:
            _normalise(st, tcs[tile_done[it]], o_all)
        if it in epilogue:
            _store(st, out, b, h, groups[epilogue[it]], tcs, o_all)


def _normalise(st, tc, o_all):
    """out rows of one tile = acc[:, :D] / max(acc[:, D], 1e-30) (GpSimd, SBUF) -> o_all."""
    plan, acc = st["plan"], st["acc"]
    D, qn, s = plan.D, tc.qn, tc.slot
    l_safe = nisa.tensor_scalar(acc[0:qn, s, D:D + 1], nl.maximum, 1e-30, engine=nisa.gpsimd_engine)
    o_all[0:qn, tc.tl, :] = nisa.tensor_scalar(acc[0:qn, s, 0:D], nl.divide, l_safe, dtype=plan.dtype,
                                               engine=nisa.gpsimd_engine)


def _store(st, out, b, h, ts, tcs, o_all):
    """One store DMA for a group's full tiles (+ one for a partial tile)."""
    D = st["plan"].D
    nfull = sum(1 for t in ts if tcs[t].qn == TILE_Q)
    i_p = nl.arange(TILE_Q)[:, None, None]
    i_d = nl.arange(D)[None, None, :]
    if nfull:
        i_t = nl.arange(nfull)[None, :, None]
        nisa.dma_copy(dst=out[b, h, tcs[ts[0]].q0 + i_t * TILE_Q + i_p, i_d], src=o_all[:, 0:nfull, :])
    if nfull < len(ts):
        tc = tcs[ts[-1]]
        nisa.dma_copy(dst=out[b, h, nl.ds(tc.q0, tc.qn), :], src=o_all[0:tc.qn, len(ts) - 1, :])


def _mask_pred(q0, qn, kb0, w):
    """Causal predicate of a (qn, w) score tile: query q0 + row >= key kb0 + column."""
    i_q = nl.arange(qn)[:, None]
    i_k = nl.arange(w)[None, :]
    return q0 + i_q >= kb0 + i_k


def _split(tc, kb0, w):
    """A masked (diagonal) block = an unmasked rectangle of u columns (keys kb0 .. q0-1, seen by
    every row; u is a multiple of 128, possibly 0) + a triangle of w - u <= qn columns (keys
    q0 ..), the only part that needs the causal mask."""
    u = tc.q0 - kb0
    assert 0 <= u < w and w - u <= tc.qn, (tc.q0, kb0, w)
    return u


def _stage_scores(st, live, i, tc, j, blocks):
    """Scores of item i: q k^T of its blocks (one PSUM bank each; a single matmul writes it)."""
    kT = st["kT"]
    scores = []
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        s = st["s_banks"][(i % st["n_si"]) * STEP_BLOCKS + g][0:tc.qn, 0:w]
        s[...] = nisa.nc_matmul(tc.qT, kT[:, kb0:kb0 + w])                      # (qn, w) fp32 PSUM
        scores.append(s)
    live[("s", i)] = scores


def _stage_extreme(st, live, i, tc, j, blocks):
    """Row extreme of each block (VectorE: with ScalarE the only engine that reads PSUM) into
    columns 1.. of the step's ext slot.  A masked diagonal block: VectorE takes the extreme of
    its unmasked rectangle from PSUM and copies the triangle to SBUF (fp32), where GpSimd masks
    it (affine_select) and takes its extreme.  GpSimd then reduces the block extremes with the
    previous running extreme (column 0, written by the previous step) into column 0 of the next
    slot, and -m_j.  GpSimd only ever touches SBUF."""
    plan = st["plan"]
    ext, neg_m = st["ext"], st["neg_m"]
    s_t, qn, nb = tc.slot, tc.qn, len(blocks)
    rop = nl.max if plan.scale >= 0 else nl.min                    # extreme of scale * s
    fill = -MASK_FILL if plan.scale >= 0 else MASK_FILL
    scores = live[("s", i)]
    slot, nxt = j % NS, (j + 1) % NS
    hi = nb + 1
    for g in nl.static_range(nb):
        kb0, w, masked = blocks[g]
        if not masked:
            ext[0:qn, s_t, slot, 1 + g:2 + g] = nisa.tensor_reduce(rop, scores[g], axis=1, keepdims=True)
            continue
        u = _split(tc, kb0, w)
        col = 1 + g
        if u:
            ext[0:qn, s_t, slot, col:col + 1] = nisa.tensor_reduce(rop, scores[g][:, 0:u], axis=1, keepdims=True)
            col, hi = nb + 1, nb + 2           # the triangle's extreme goes to the extra column
        tri = st["tri_ring"][0:qn, st["tri_slot"][i], 0:w - u]
        tri[...] = nisa.tensor_copy(scores[g][:, u:w], engine=nisa.vector_engine)
        tri[...] = nisa.affine_select(_mask_pred(tc.q0, qn, kb0 + u, w - u), tri, fill)   # SBUF, GpSimd
        ext[0:qn, s_t, slot, col:col + 1] = nisa.tensor_reduce(rop, tri, axis=1, keepdims=True,
                                                               engine=nisa.gpsimd_engine)
        live[("tri", i)] = (g, u, tri)
    lo = 0 if j > 0 else 1
    ext[0:qn, s_t, nxt, 0:1] = nisa.tensor_reduce(rop, ext[0:qn, s_t, slot, lo:hi], axis=1, keepdims=True,
                                                  engine=nisa.gpsimd_engine)
    neg_m[0:qn, s_t, slot:slot + 1] = nisa.tensor_scalar(ext[0:qn, s_t, nxt, 0:1], nl.multiply, -plan.scale,
                                                         engine=nisa.gpsimd_engine)


def _stage_exp(st, live, i, tc, j, blocks):
    """alpha_j = exp(m_{j-1} - m_j) and p = exp(scale*s - m_j) in the input dtype (ScalarE);
    a masked block's triangle is read from its masked SBUF copy."""
    plan, dt = st["plan"], st["plan"].dtype
    neg_m, alpha, p_ring = st["neg_m"], st["alpha"], st["p_ring"]
    s_t, qn = tc.slot, tc.qn
    slot, r = j % NS, i % st["ring"]
    bias = neg_m[0:qn, s_t, slot:slot + 1]
    if j > 0:
        prev = (j - 1) % NS
        alpha[0:qn, s_t, slot:slot + 1] = nisa.activation(nl.exp, neg_m[0:qn, s_t, prev:prev + 1],
                                                          bias=bias, scale=-1.0)
    scores = live.pop(("s", i))
    tri = live.pop(("tri", i), None)
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        c0 = g * KEY_BLOCK
        if not masked:
            p_ring[0:qn, r, c0:c0 + w] = nisa.activation(nl.exp, scores[g], bias=bias, scale=plan.scale, dtype=dt)
            continue
        _, u, tri_t = tri
        if u:
            p_ring[0:qn, r, c0:c0 + u] = nisa.activation(nl.exp, scores[g][:, 0:u], bias=bias, scale=plan.scale,
                                                         dtype=dt)
        if plan.scale == 0:
            # scale 0 maps every score, masked ones too, to exp(0) = 1: mask after the exp (SBUF)
            p_ring[0:qn, r, c0 + u:c0 + w] = nisa.affine_select(
                _mask_pred(tc.q0, qn, kb0 + u, w - u),
                nisa.activation(nl.exp, tri_t, bias=bias, scale=0.0, dtype=dt), 0.0)
        else:
            p_ring[0:qn, r, c0 + u:c0 + w] = nisa.activation(nl.exp, tri_t, bias=bias, scale=plan.scale, dtype=dt)


def _stage_pT(st, live, i, tc, j, blocks):
    """p^T of item i: one 3-D DMA transpose of the whole step, or per block 128-key chunks on
    TensorE into one PSUM tile, evicted into the pT ring by VectorE / ScalarE (alternating)."""
    plan, dt = st["plan"], st["plan"].dtype
    p_ring, pT_ring = st["p_ring"], st["pT_ring"]
    qn, r = tc.qn, i % st["ring"]
    if i in st["dma"]:
        nch = len(blocks) * CHUNKS
        # (qn, nch, 128) view of p (key c*128 + k at [:, c, k]) -> (128 keys, nch, qn)
        live[("pT", i)] = nisa.dma_transpose(p_ring[0:qn, r, :].reshape((qn, nch, TILE_K)), axes=(2, 1, 0))
        return
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        nch = _cdiv(w, TILE_K)
        pT_ps = nl.ndarray((TILE_K, CHUNKS, qn), dt, buffer=nl.psum)
        for c in nl.static_range(nch):
            kc = min(TILE_K, w - c * TILE_K)
            c0 = g * KEY_BLOCK + c * TILE_K
            pT_ps[0:kc, c, :] = nisa.nc_transpose(p_ring[0:qn, r, c0:c0 + kc])
        full_ch, rem = divmod(w, TILE_K)
        a, bb = EVICT_DVE
        ne = st["n_evict"]
        st["n_evict"] += 1
        eng = nisa.vector_engine if (ne * a) // bb != ((ne + 1) * a) // bb else nisa.scalar_engine
        b0 = g * CHUNKS
        rt = st["pe_slot"][i]
        if full_ch:
            pT_ring[:, rt, b0:b0 + full_ch, 0:qn] = nisa.tensor_copy(pT_ps[:, 0:full_ch, :], engine=eng)
        if rem:
            pT_ring[0:rem, rt, b0 + full_ch, 0:qn] = nisa.tensor_copy(pT_ps[0:rem, full_ch, :], engine=eng)


def _stage_pv(st, live, i, tc, j, blocks):
    """[o | l] of item i = p @ [V | 1]: one PSUM accumulation group in the documented form
    (nl.zeros PSUM tile, then += of every matmul), evicted by ScalarE (into acc directly for
    the first step)."""
    plan, vt = st["plan"], st["vt"]
    acc, o_ring = st["acc"], st["o_ring"]
    D, s_t, qn = plan.D, tc.slot, tc.qn
    pT = live.pop(("pT", i), None)
    if pT is None:
        pT = st["pT_ring"][:, st["pe_slot"][i], :, 0:qn]
    o_ps = nl.zeros((qn, D + 1), nl.float32, buffer=nl.psum)
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        t0 = kb0 // TILE_K
        for c in nl.static_range(_cdiv(w, TILE_K)):
            kc = min(TILE_K, w - c * TILE_K)
            o_ps += nisa.nc_matmul(pT[0:kc, g * CHUNKS + c, 0:qn], vt[0:kc, t0 + c, :])
    if j == 0:
        acc[0:qn, s_t, :] = nisa.activation(nl.copy, o_ps)
    else:
        o_ring[0:qn, i % RING_O, :] = nisa.activation(nl.copy, o_ps)


def _stage_update(st, live, i, tc, j, blocks):
    """acc = alpha_j * acc + [o | l] on GpSimd (SBUF operands only)."""
    if j == 0:
        return
    acc, alpha, o_ring = st["acc"], st["alpha"], st["o_ring"]
    s_t, qn, slot = tc.slot, tc.qn, j % NS
    acc[0:qn, s_t, :] = nisa.scalar_tensor_tensor(data=acc[0:qn, s_t, :], op0=nl.multiply,
                                                  operand0=alpha[0:qn, s_t, slot:slot + 1], op1=nl.add,
                                                  operand1=o_ring[0:qn, i % RING_O, :], engine=nisa.gpsimd_engine)
