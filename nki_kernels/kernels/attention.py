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
GROUP_TILES = 8         # query tiles per software pipeline (one pipeline fill / drain per group)
GROUP_TILES_FP32 = 4    # the same for fp32 (keeps the working set within SBUF_WORK)
NS = 6                  # ring depth (steps) of the per-tile running extreme / -m / alpha slots
RING_O = 4              # ring depth (items) of the evicted [o | l] tiles
SCORE_ITEMS = 3         # items whose score tiles (STEP_BLOCKS PSUM banks each) can be live at once
SCORE_ITEMS_FP32 = 2    # fp32: p^T of a block in PSUM is a whole bank, so one item fewer
RING_P, RING_PT = 8, 4  # ring depth (items) of p and of TensorE-made p^T, bf16/fp16 (2 KiB per item)
RING_P_FP32, RING_PT_FP32 = 2, 3   # the same for fp32 (4 KiB per item; no DMA transposes)
DMA_T = (2, 3)          # (a, b): a of every b full bf16/fp16 steps get p^T by DMA, the rest on TensorE
EVICT_DVE_OF = 2        # of the TensorE-transposed blocks, every 2nd is evicted by VectorE, else ScalarE
# software-pipeline lags (items ahead of the p @ v stage) of the stages issued in one iteration
LAG_SCORES, LAG_EXTREME, LAG_EXP, LAG_PT, LAG_PV, LAG_UPDATE = 5, 4, 3, 2, 0, -1
MAX_D = 128             # head dim = contraction of q k^T (partitions of q^T / k^T): hard limit
SBUF_BYTES = 212984     # usable SBUF bytes per partition (nl.tile_size.total_available_sbuf_size)
SBUF_WORK = 48 * 1024   # per-partition head-room for the per-group working set (~41 KiB) and slack
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
    Tiling: (constants KEY_BLOCK=512, TILE_Q=TILE_K=128, STEP_BLOCKS=2, GROUP_TILES=8 (fp32 4);
             diagram in attention_design.md)
      L1 (b, h), affine: K^T and V loaded once per head, 512 keys per DMA (K^T via 4 TensorE
         transposes into one PSUM bank and one ScalarE copy).  Resident: K^T + [V | 1].
      L2 groups of GROUP_TILES query tiles, affine (static_range when causal: a tile's key extent
         depends on its position; leftover and partial tiles in one more group).  One DMA loads
         the group's q, one stores its output.
      L3 (tile, softmax step) items of the group, interleaved tile-fastest, as one static software
         pipeline (_q_tiles): per step of 2 key blocks (1,024 keys) two (128 x 512) fp32 score
         tiles in PSUM (3 items = 6 banks in rotation), p (128 x 1,024, input dtype) in an SBUF
         ring, p^T by one DMA transpose (2 of 3 full bf16/fp16 steps) or by 4 TensorE transposes
         per block + one PSUM eviction, one (128 x D+1) fp32 PSUM accumulation group for
         p @ [V | 1].  Causal: blocks above the diagonal are never visited; only the last block
         of a tile is masked and trimmed.
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
      touches SBUF; DMA transposes only for 2-byte dtypes, SBUF -> SBUF, 3-D (2, 1, 0).
    Numerics: q k^T and p v on TensorE in the input dtype, fp32 PSUM accumulation; row max, exp,
      acc, l and the final divide in fp32; p rounded to the input dtype before p v (as in
      FlashAttention) and l is the fp32 sum of those rounded p (the ones column of [V | 1]).
      Masked scores become -3e38 (finite; +3e38 for scale < 0, where the row extreme is a min);
      the running max starts at the first step's max (no -inf anywhere); the final divide uses
      max(l, 1e-30), so a row with no keys would give 0, not NaN.  Tolerance vs the float64
      oracle: the project table; bf16/fp16 within 2x a same-precision NumPy baseline.
    Pseudocode (per b, h):
      KT = transpose(k) (D x Sk); V1 = [v | 1] in 128-key tiles
      for each group of query tiles, for each query tile (rows r0..r0+n):
        QT = transpose(q[r0:r0+n])                             # D x n stationary
        for each step of <= 2 key blocks j (512 keys; causal: up to the diagonal):
          s_j = QT^T @ KT[:, j]                                # PSUM n x 512 fp32
          s_j = where(row >= key, s_j, -3e38) if on diagonal   # GpSimd affine_select
          m_new = max(m, max_j rowmax(s_j))                    # VectorE per block, GpSimd combine
          alpha = exp(scale*(m - m_new))                       # ScalarE
          p_j = exp(scale * s_j - scale * m_new)               # ScalarE, one instruction per block
          pT = transpose(p) (DMA, or TensorE -> PSUM -> SBUF)
          [o | l]_step = sum_j,c pT[c]^T @ V1[j, c]            # one PSUM group n x (D+1)
          acc = alpha * acc + [o | l]_step;  m = m_new         # GpSimd (after a ScalarE eviction)
        out[r0:r0+n] = acc[:, :D] / max(acc[:, D], 1e-30)      # GpSimd
    Cost notes: (cost-model ESTIMATES, no hardware) per 128 x 512 block VectorE's fp32 row max
      from PSUM (~533 ns) and ScalarE's exp (~427 ns) are the floors; TensorE runs 1 q k^T +
      4 p v (+ 4 transposes on 1 block in 3); p^T by DMA costs ~0.7 us of all 16 DMA queues per
      block.  S=4096 D=128 bf16: ~223 us non-causal, ~157 us causal (was 428 / 249); busy
      ACT ~154, DVE ~148, PE ~139, DMA ~135 us; see attention_design.md.
    """
    plan = _plan(q, k, v, causal, softmax_scale)
    out = nl.ndarray((plan.B, plan.H, plan.Sq, plan.D), plan.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(plan.B):
        for h in nl.affine_range(plan.H):
            _one_head(q, k, v, out, b, h, plan)
    return out


def _one_head(q, k, v, out, b, h, plan):
    """All query tiles of one (b, h).  A function, so its resident K^T / V die with it."""
    D, Sk = plan.D, plan.Sk
    dt = plan.dtype
    kT = nl.ndarray((D, Sk), dt, buffer=nl.sbuf)
    # V with a ones column: p @ [V | 1] puts the row sums of p next to p @ V in one PSUM group
    vt = nl.ndarray((TILE_K, plan.n_kt, D + 1), dt, buffer=nl.sbuf)

    # -- K^T and V, 512 keys per step: row kb0 + c*128 + p of k/v lands on partition p, chunk c.
    i_p = nl.arange(TILE_K)[:, None, None]
    i_c = nl.arange(CHUNKS)[None, :, None]
    i_d = nl.arange(D)[None, None, :]
    for j in nl.affine_range(plan.n_kb_full):
        rows = j * KEY_BLOCK + i_c * TILE_K + i_p
        nisa.dma_copy(dst=vt[:, nl.ds(j * CHUNKS, CHUNKS), 0:D], src=v[b, h, rows, i_d])
        k_nat = nl.load(k[b, h, rows, i_d])
        kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
        for c in nl.affine_range(CHUNKS):
            kT_ps[:, nl.ds(c * TILE_K, TILE_K)] = nisa.nc_transpose(k_nat[:, c, :])
        kT[:, nl.ds(j * KEY_BLOCK, KEY_BLOCK)] = nisa.tensor_copy(kT_ps, engine=nisa.scalar_engine)
    if plan.kb_tail:
        kb0 = plan.n_kb_full * KEY_BLOCK
        n_full, rem = divmod(plan.kb_tail, TILE_K)
        t0 = plan.n_kb_full * CHUNKS
        kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
        if n_full:
            i_c2 = nl.arange(n_full)[None, :, None]
            rows = kb0 + i_c2 * TILE_K + i_p
            nisa.dma_copy(dst=vt[:, t0:t0 + n_full, 0:D], src=v[b, h, rows, i_d])
            k_nat = nl.load(k[b, h, rows, i_d])
            for c in nl.static_range(n_full):
                kT_ps[:, c * TILE_K:(c + 1) * TILE_K] = nisa.nc_transpose(k_nat[:, c, :])
        if rem:
            r0 = kb0 + n_full * TILE_K
            nisa.dma_copy(dst=vt[0:rem, t0 + n_full, 0:D], src=v[b, h, r0:r0 + rem, :])
            k_rem = nl.load(k[b, h, r0:r0 + rem, :])
            kT_ps[:, n_full * TILE_K:plan.kb_tail] = nisa.nc_transpose(k_rem)
        kT[:, kb0:Sk] = nisa.tensor_copy(kT_ps[:, 0:plan.kb_tail], engine=nisa.scalar_engine)
    vt[:, :, D:D + 1] = nisa.memset((TILE_K, plan.n_kt, 1), 1.0, dt, engine=nisa.gpsimd_engine)
    kT_ps = k_nat = k_rem = None      # setup tiles die here (PSUM bank free for the pipeline)

    # -- query tiles in groups of GROUP_TILES: one software pipeline per group
    G = GROUP_TILES if plan.isz == 2 else GROUP_TILES_FP32
    n_groups, left = divmod(plan.n_q_full, G)

    def group(g0, n):
        return [((g0 + t) * TILE_Q, TILE_Q) for t in range(n)]

    if plan.causal:
        # the key extent of a tile depends on its position: static indices
        for g in nl.static_range(n_groups):
            _q_tiles(q, out, kT, vt, b, h, group(g * G, G), plan)
    else:
        for g in nl.affine_range(n_groups):
            _q_tiles(q, out, kT, vt, b, h, [((g * G + t) * TILE_Q, TILE_Q) for t in range(G)], plan)
    rest = group(n_groups * G, left)
    if plan.q_tail:
        rest.append((plan.n_q_full * TILE_Q, plan.q_tail))
    if rest:
        _q_tiles(q, out, kT, vt, b, h, rest, plan)


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
    keys, and of those all but every PE_T_EVERY-th, so that the DMA queues, TensorE and the
    PSUM-evicting engines (VectorE, ScalarE) share the work.  Trace-time Python."""
    if plan.dtype == np.float32:
        return set()
    out, cnt = set(), 0
    for i, (t, j) in enumerate(items):
        blocks = steps[t][j]
        if tcs[t].qn == TILE_Q and len(blocks) == STEP_BLOCKS and all(w == KEY_BLOCK for _, w, _ in blocks):
            a, b = DMA_T
            if (cnt * a) // b != ((cnt + 1) * a) // b:
                out.add(i)
            cnt += 1
    return out


class _Tile:
    """Per-query-tile context of a group (trace-time record; the on-chip state lives in the
    group's tensors, indexed by the tile's slot t)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _q_tiles(q, out, kT, vt, b, h, tiles, plan):
    """Query tiles [(q0, qn), ...] (consecutive, only the last may be partial) of one head:
    online softmax over the key blocks each sees.  Rows q0..q0+qn-1 of tile t see keys < Sk
    (causal: < min(Sk, q0 + qn)).

    The (tile, step) items run as a software pipeline in program order: iteration i issues
    stage s of item i + LAGS[s] (scores, row extremes, exp, p^T, p @ v, acc update), so every
    in-order engine queue holds independent work while an item's dependency chain runs;
    consecutive items belong to different tiles."""
    D, dt = plan.D, plan.dtype
    nt = len(tiles)
    nfull = sum(1 for _, qn in tiles if qn == TILE_Q)
    # group tensors are sized for a full group whatever nt is: the working set is independent of Sq
    qmax, ng = TILE_Q, (GROUP_TILES if plan.isz == 2 else GROUP_TILES_FP32)
    # group state (fp32): [o | l] accumulators; per tile and step ring slots (NS deep) of the
    # running extreme (column 0) and the step's block extremes (1..), -m and alpha
    acc = nl.ndarray((qmax, ng, D + 1), nl.float32, buffer=nl.sbuf)
    ext = nl.ndarray((qmax, ng, NS, STEP_BLOCKS + 1), nl.float32, buffer=nl.sbuf)
    neg_m = nl.ndarray((qmax, ng, NS), nl.float32, buffer=nl.sbuf)
    alpha = nl.ndarray((qmax, ng, NS), nl.float32, buffer=nl.sbuf)
    # per item ring buffers (static slots): p (exp output), p^T of TensorE-transposed blocks,
    # evicted [o | l]
    sw = STEP_BLOCKS * KEY_BLOCK
    ring, ring_t = (RING_P, RING_PT) if plan.isz == 2 else (RING_P_FP32, RING_PT_FP32)
    p_ring = nl.ndarray((qmax, ring, sw), dt, buffer=nl.sbuf)
    pT_ring = nl.ndarray((TILE_K, ring_t, STEP_BLOCKS * CHUNKS, qmax), dt, buffer=nl.sbuf)
    o_ring = nl.ndarray((qmax, RING_O, D + 1), nl.float32, buffer=nl.sbuf)
    # PSUM score banks: SCORE_ITEMS items x STEP_BLOCKS blocks of (128 x 512) fp32, one bank
    # each, reused in rotation (a bank is rewritten once the exp of its previous block read it)
    n_si = SCORE_ITEMS if plan.isz == 2 else SCORE_ITEMS_FP32
    s_banks = [nl.ndarray((qmax, KEY_BLOCK), nl.float32, buffer=nl.psum) for _ in range(n_si * STEP_BLOCKS)]

    # q: the full tiles of the group in one DMA (row q0 + t*128 + p -> partition p, slot t);
    # the same buffer later holds the normalised outputs for one store DMA
    q_all = nl.ndarray((qmax, ng, D), dt, buffer=nl.sbuf)
    o_all = q_all
    i_p = nl.arange(TILE_Q)[:, None, None]
    i_d = nl.arange(D)[None, None, :]
    if nfull:
        i_t = nl.arange(nfull)[None, :, None]
        nisa.dma_copy(dst=q_all[:, 0:nfull, :], src=q[b, h, tiles[0][0] + i_t * TILE_Q + i_p, i_d])
    if nfull < nt:
        q0, qn = tiles[nt - 1]
        nisa.dma_copy(dst=q_all[0:qn, nt - 1, :], src=q[b, h, nl.ds(q0, qn), :])
    qT_all = nl.ndarray((D, ng, qmax), dt, buffer=nl.sbuf)
    tcs, steps = [], []
    for t in nl.static_range(nt):
        q0, qn = tiles[t]
        qT = qT_all[:, t, 0:qn]                                                  # (D, qn) stationary
        qT[...] = nisa.tensor_copy(nisa.nc_transpose(q_all[0:qn, t, :]), engine=nisa.scalar_engine)
        if plan.causal:
            k_end = min(plan.Sk, q0 + qn)    # key j is masked for row i iff j > i
            masked = k_end - 1 > q0
        else:
            k_end = plan.Sk
            masked = False
        tcs.append(_Tile(t=t, q0=q0, qn=qn, qT=qT))
        steps.append(_key_steps(k_end, masked))
    items = _interleave([len(s) for s in steps])
    n = len(items)
    dma = _dma_steps(plan, items, steps, tcs)
    pe_slot = {}
    for i in range(n):
        if i not in dma:
            pe_slot[i] = len(pe_slot) % ring_t
    st = dict(acc=acc, ext=ext, neg_m=neg_m, alpha=alpha, p_ring=p_ring, pT_ring=pT_ring, o_ring=o_ring,
              kT=kT, vt=vt, plan=plan, ring=ring, dma=dma, pe_slot=pe_slot, s_banks=s_banks, n_si=n_si)
    live = {}

    def run(stage, i):
        if 0 <= i < n:
            t, j = items[i]
            stage(st, live, i, tcs[t], j, steps[t][j])

    # lags: a score bank is rewritten only after the exp that read it (n_si items in flight)
    lag_s = min(LAG_SCORES, LAG_EXP + n_si - 1)
    lag_x = min(LAG_EXTREME, lag_s)
    # ring hazards (trace-time): each ring slot is rewritten only after its last reader
    assert ring > LAG_EXP - LAG_PT and ring_t > LAG_PT - LAG_PV and RING_O > LAG_PV - LAG_UPDATE
    assert NS > LAG_EXP - LAG_UPDATE + 1 and lag_x >= LAG_EXP
    stages = [(_stage_scores, lag_s), (_stage_extreme, lag_x), (_stage_exp, LAG_EXP),
              (_stage_pT, LAG_PT), (_stage_pv, LAG_PV), (_stage_update, LAG_UPDATE)]
    lo = min(lag for _, lag in stages)
    hi = max(lag for _, lag in stages)
    for it in nl.static_range(-hi, n - lo):
        for s in range(len(stages)):
            run(stages[s][0], it + stages[s][1])

    for t in nl.static_range(nt):
        qn = tcs[t].qn
        l_safe = nisa.tensor_scalar(acc[0:qn, t, D:D + 1], nl.maximum, 1e-30, engine=nisa.gpsimd_engine)
        o_all[0:qn, t, :] = nisa.tensor_scalar(acc[0:qn, t, 0:D], nl.divide, l_safe, dtype=dt,
                                               engine=nisa.gpsimd_engine)
    if nfull:
        i_t = nl.arange(nfull)[None, :, None]
        nisa.dma_copy(dst=out[b, h, tiles[0][0] + i_t * TILE_Q + i_p, i_d], src=o_all[:, 0:nfull, :])
    if nfull < nt:
        q0, qn = tiles[nt - 1]
        nisa.dma_copy(dst=out[b, h, nl.ds(q0, qn), :], src=o_all[0:qn, nt - 1, :])


def _mask_pred(q0, qn, kb0, w):
    """Causal predicate of a (qn, w) score tile: query q0 + row >= key kb0 + column."""
    i_q = nl.arange(qn)[:, None]
    i_k = nl.arange(w)[None, :]
    return q0 + i_q >= kb0 + i_k


def _stage_scores(st, live, i, tc, j, blocks):
    """Scores of item i: q k^T of its blocks (one PSUM bank each), causal mask on the last."""
    plan, kT = st["plan"], st["kT"]
    fill = -MASK_FILL if plan.scale >= 0 else MASK_FILL
    scores = []
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        s = st["s_banks"][(i % st["n_si"]) * STEP_BLOCKS + g][0:tc.qn, 0:w]
        s[...] = nisa.nc_matmul(tc.qT, kT[:, kb0:kb0 + w])                      # (qn, w) fp32 PSUM
        if masked:
            s = nisa.affine_select(_mask_pred(tc.q0, tc.qn, kb0, w), s, fill)   # SBUF fp32
        scores.append(s)
    live[("s", i)] = scores


def _stage_extreme(st, live, i, tc, j, blocks):
    """Row extreme of each block (VectorE: with ScalarE the only engine that reads PSUM) into
    columns 1.. of the step's ext slot; GpSimd reduces them with the previous running extreme
    (column 0, written by the previous step) into column 0 of the next slot, and -m_j."""
    plan = st["plan"]
    ext, neg_m = st["ext"], st["neg_m"]
    t, qn, nb = tc.t, tc.qn, len(blocks)
    rop = nl.max if plan.scale >= 0 else nl.min                    # extreme of scale * s
    scores = live[("s", i)]
    slot, nxt = j % NS, (j + 1) % NS
    for g in nl.static_range(nb):
        ext[0:qn, t, slot, 1 + g:2 + g] = nisa.tensor_reduce(rop, scores[g], axis=1, keepdims=True)
    lo = 0 if j > 0 else 1
    ext[0:qn, t, nxt, 0:1] = nisa.tensor_reduce(rop, ext[0:qn, t, slot, lo:nb + 1], axis=1, keepdims=True,
                                                engine=nisa.gpsimd_engine)
    neg_m[0:qn, t, slot:slot + 1] = nisa.tensor_scalar(ext[0:qn, t, nxt, 0:1], nl.multiply, -plan.scale,
                                                       engine=nisa.gpsimd_engine)


def _stage_exp(st, live, i, tc, j, blocks):
    """alpha_j = exp(m_{j-1} - m_j) and p = exp(scale*s - m_j) in the input dtype (ScalarE)."""
    plan, dt = st["plan"], st["plan"].dtype
    neg_m, alpha, p_ring = st["neg_m"], st["alpha"], st["p_ring"]
    t, qn = tc.t, tc.qn
    slot, r = j % NS, i % st["ring"]
    if j > 0:
        prev = (j - 1) % NS
        alpha[0:qn, t, slot:slot + 1] = nisa.activation(nl.exp, neg_m[0:qn, t, prev:prev + 1],
                                                        bias=neg_m[0:qn, t, slot:slot + 1], scale=-1.0)
    scores = live.pop(("s", i))
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        c0 = g * KEY_BLOCK
        if masked and plan.scale == 0:
            # scale 0 maps every score to exp(0) = 1: mask after the exp instead
            p_ring[0:qn, r, c0:c0 + w] = nisa.affine_select(
                _mask_pred(tc.q0, qn, kb0, w),
                nisa.activation(nl.exp, scores[g], bias=neg_m[0:qn, t, slot:slot + 1], scale=0.0, dtype=dt), 0.0)
        else:
            p_ring[0:qn, r, c0:c0 + w] = nisa.activation(nl.exp, scores[g], bias=neg_m[0:qn, t, slot:slot + 1],
                                                         scale=plan.scale, dtype=dt)


def _stage_pT(st, live, i, tc, j, blocks):
    """p^T of item i: one 3-D DMA transpose of the whole step, or per block 128-key chunks on
    TensorE into one PSUM bank, evicted into the pT ring by VectorE / ScalarE (alternating)."""
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
        eng = nisa.vector_engine if (i + g) % EVICT_DVE_OF == 0 else nisa.scalar_engine
        b0 = g * CHUNKS
        rt = st["pe_slot"][i]
        if full_ch:
            pT_ring[:, rt, b0:b0 + full_ch, 0:qn] = nisa.tensor_copy(pT_ps[:, 0:full_ch, :], engine=eng)
        if rem:
            pT_ring[0:rem, rt, b0 + full_ch, 0:qn] = nisa.tensor_copy(pT_ps[0:rem, full_ch, :], engine=eng)


def _stage_pv(st, live, i, tc, j, blocks):
    """[o | l] of item i = p @ [V | 1] (one PSUM accumulation group, TensorE), evicted by
    ScalarE (into acc directly for the first step)."""
    plan, vt = st["plan"], st["vt"]
    acc, o_ring = st["acc"], st["o_ring"]
    D, t, qn, r = plan.D, tc.t, tc.qn, i % st["ring"]
    pT = live.pop(("pT", i), None)
    if pT is None:
        pT = st["pT_ring"][:, st["pe_slot"][i], :, 0:qn]
    o_ps = nl.ndarray((qn, D + 1), nl.float32, buffer=nl.psum)
    first = True
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        t0 = kb0 // TILE_K
        for c in nl.static_range(_cdiv(w, TILE_K)):
            kc = min(TILE_K, w - c * TILE_K)
            mm = nisa.nc_matmul(pT[0:kc, g * CHUNKS + c, 0:qn], vt[0:kc, t0 + c, :])
            if first:
                o_ps[...] = mm
                first = False
            else:
                o_ps[...] += mm
    if j == 0:
        acc[0:qn, t, :] = nisa.activation(nl.copy, o_ps)
    else:
        o_ring[0:qn, i % RING_O, :] = nisa.activation(nl.copy, o_ps)


def _stage_update(st, live, i, tc, j, blocks):
    """acc = alpha_j * acc + [o | l] on GpSimd (SBUF operands only)."""
    if j == 0:
        return
    acc, alpha, o_ring = st["acc"], st["alpha"], st["o_ring"]
    t, qn, slot = tc.t, tc.qn, j % NS
    acc[0:qn, t, :] = nisa.scalar_tensor_tensor(data=acc[0:qn, t, :], op0=nl.multiply,
                                                operand0=alpha[0:qn, t, slot:slot + 1], op1=nl.add,
                                                operand1=o_ring[0:qn, i % RING_O, :], engine=nisa.gpsimd_engine)
