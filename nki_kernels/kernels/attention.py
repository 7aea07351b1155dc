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
MAX_D = 128             # head dim = contraction of q k^T (partitions of q^T / k^T): hard limit
SBUF_BYTES = 212984     # usable SBUF bytes per partition (nl.tile_size.total_available_sbuf_size)
SBUF_WORK = 16 * 1024   # per-partition head-room for the per-q-tile working set and allocator slack
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
    resident = Sk * isz + n_kt * D * isz      # K^T (D partitions x Sk) + V (128 x n_kt x D)
    budget = SBUF_BYTES - SBUF_WORK
    if resident > budget:
        fail(KERNEL, "k", f"Sk = {Sk}, D = {D}, {dname}: K^T and V need {resident} B per partition",
             f"Sk * itemsize + ceil(Sk/128) * D * itemsize <= {budget} B (resident in SBUF; e.g. Sk <= "
             f"{budget // (2 * isz)} for D = 128)")
    return _Plan(B=B, H=H, Sq=Sq, Sk=Sk, D=D, dtype=q.dtype, causal=bool(causal), scale=scale,
                 n_kt=n_kt, n_kb_full=Sk // KEY_BLOCK, kb_tail=Sk % KEY_BLOCK,
                 n_q_full=Sq // TILE_Q, q_tail=Sq % TILE_Q)


@nki.jit
def flash_attention(q, k, v, causal=False, softmax_scale=None):
    """softmax(q k^T * scale [+ causal mask]) v with an online (blocked) softmax: 128-row query
    tiles against 512-key blocks, never an Sq x Sk buffer.

    Layout:
      q (B, H, Sq, D), k (B, H, Sk, D), v (B, H, Sk, D): HBM, one of fp32 / bf16 / fp16.
      returns (B, H, Sq, D) in q's dtype, HBM (nl.shared_hbm).
      On chip per head: K^T (D partitions x Sk) and V (128 partitions = key within a 128-key
      tile, ceil(Sk/128) tiles, D) resident in SBUF; per query tile q^T (D partitions x 128).
    Tiling: (constants KEY_BLOCK=512, TILE_Q=TILE_K=128, STEP_BLOCKS=2; diagram in attention_design.md)
      L1 (b, h), affine: V and K^T loaded once per head, 512 keys per step (one DMA each; K^T via
         4 TensorE transposes into one PSUM bank and one copy).  Resident: K^T + V.
      L2 pairs of query tiles, affine (static_range when causal: a tile's key extent depends on
         its position; partial last tile separate).  Resident per tile: q^T (stationary of every
         q k^T), -running max (one (128,1) fp32 tile per step), l (128,1) and acc (128,D) fp32.
      L3 softmax steps of 2 key blocks (1,024 keys), static (unrolled so that they can be
         software-pipelined, see _q_tiles): per block a (128 x 512) fp32 score tile in one PSUM
         bank, p (128 x 512, input dtype) in SBUF, p^T (4 chunks x 128 x 128) in one PSUM bank then
         SBUF; per step one (128 x D) fp32 PSUM accumulation group for p @ v.  Causal: blocks
         above the diagonal are never visited; only the last block of a tile is masked and trimmed.
    Constraints:
      hard (ValueError before any instruction): rank 4; fp32/bf16/fp16, one dtype; equal B, H, D;
      k and v with equal Sk; D <= 128; K^T + V resident: Sk*itemsize + ceil(Sk/128)*D*itemsize
      <= 196,600 B per partition (D=128: Sk <= 24,575 fp32, 49,150 bf16/fp16); causal a bool;
      softmax_scale None (1/sqrt(D)) or a finite real (0 and negative allowed).
      tested: Sq, Sk in 1..16,384 incl. non-multiples of 128 and Sq != Sk; D in {1, 32, 64, 128};
      B, H <= 2.
    Numerics: q k^T and p v on TensorE in the input dtype, fp32 PSUM accumulation; row max, exp,
      row sums, acc, l and the final divide in fp32; p rounded to the input dtype before p v (as in
      FlashAttention).  Masked scores become -3e38 (finite; +3e38 for scale < 0, where the row
      extreme is a min); the running max starts at the first step's max (no -inf anywhere); the
      final divide uses max(l, 1e-30), so a row with no keys would give 0, not NaN.  Tolerance vs
      the float64 oracle: the project table; bf16/fp16 within 2x a same-precision NumPy baseline.
    Pseudocode (per b, h):
      KT = transpose(k) (D x Sk); V = v in 128-key tiles
      for each query tile (rows r0..r0+n):
        QT = transpose(q[r0:r0+n])                             # D x n stationary
        for each step of <= 2 key blocks j (512 keys; causal: up to the diagonal):
          s_j = QT^T @ KT[:, j]                                # PSUM n x 512 fp32
          s_j = where(row >= key, s_j, -3e38) if on diagonal   # GpSimd affine_select
          m_new = max(m, scale * max_j rowmax(s_j)); alpha = exp(m - m_new)
          p_j = exp(scale * s_j - m_new); rs_j = rowsum(p_j)   # one ScalarE instruction each
          pT_j = transpose(p_j) in 128-key chunks              # TensorE -> PSUM -> SBUF
          o = sum_j,c pT_j[c]^T @ V[j, c]                      # one PSUM group n x D
          l = alpha * l + sum_j rs_j;  acc = alpha * acc + o;  m = m_new
        out[r0:r0+n] = acc / max(l, 1e-30)
    Cost notes: per 128 x 512 block TensorE runs 9 instructions (1 q k^T, 4 transposes, 4 p v;
      ~1,536 cycles bf16), ScalarE one fused exp + row sum (~576 cycles) and every other p^T
      eviction, VectorE a 512-wide fp32 row max from PSUM (~512 cycles) and the rest.  The cost
      model puts S=4096 D=128 bf16 at ~450 us non-causal, ~270 us causal (TensorE-critical, mostly
      because its dI/dt throttle model keeps TensorE at half speed below 50% utilisation), against
      ~110 us ideal (trn2-hardware.md §5); see attention_design.md for the breakdown.
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
    vt = nl.ndarray((TILE_K, plan.n_kt, D), dt, buffer=nl.sbuf)

    # -- K^T and V, 512 keys per step: row kb0 + c*128 + p of k/v lands on partition p, chunk c.
    i_p = nl.arange(TILE_K)[:, None, None]
    i_c = nl.arange(CHUNKS)[None, :, None]
    i_d = nl.arange(D)[None, None, :]
    for j in nl.affine_range(plan.n_kb_full):
        rows = j * KEY_BLOCK + i_c * TILE_K + i_p
        nisa.dma_copy(dst=vt[:, nl.ds(j * CHUNKS, CHUNKS), :], src=v[b, h, rows, i_d])
        k_nat = nl.load(k[b, h, rows, i_d])
        kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
        for c in nl.affine_range(CHUNKS):
            kT_ps[:, nl.ds(c * TILE_K, TILE_K)] = nisa.nc_transpose(k_nat[:, c, :])
        kT[:, nl.ds(j * KEY_BLOCK, KEY_BLOCK)] = nisa.tensor_copy(kT_ps)
    if plan.kb_tail:
        kb0 = plan.n_kb_full * KEY_BLOCK
        n_full, rem = divmod(plan.kb_tail, TILE_K)
        t0 = plan.n_kb_full * CHUNKS
        kT_ps = nl.ndarray((D, KEY_BLOCK), dt, buffer=nl.psum)
        if n_full:
            i_c2 = nl.arange(n_full)[None, :, None]
            rows = kb0 + i_c2 * TILE_K + i_p
            nisa.dma_copy(dst=vt[:, t0:t0 + n_full, :], src=v[b, h, rows, i_d])
            k_nat = nl.load(k[b, h, rows, i_d])
            for c in nl.static_range(n_full):
                kT_ps[:, c * TILE_K:(c + 1) * TILE_K] = nisa.nc_transpose(k_nat[:, c, :])
        if rem:
            r0 = kb0 + n_full * TILE_K
            nisa.dma_copy(dst=vt[0:rem, t0 + n_full, :], src=v[b, h, r0:r0 + rem, :])
            k_rem = nl.load(k[b, h, r0:r0 + rem, :])
            kT_ps[:, n_full * TILE_K:plan.kb_tail] = nisa.nc_transpose(k_rem)
        kT[:, kb0:Sk] = nisa.tensor_copy(kT_ps[:, 0:plan.kb_tail])

    # -- query tiles, two per iteration: their steps interleave in one software pipeline
    n_pairs, odd = divmod(plan.n_q_full, 2)
    if plan.causal:
        # the key extent of a tile depends on its position: static indices
        for i in nl.static_range(n_pairs):
            _q_tiles(q, out, kT, vt, b, h, [(2 * i * TILE_Q, TILE_Q), ((2 * i + 1) * TILE_Q, TILE_Q)], plan)
    else:
        for i in nl.affine_range(n_pairs):
            _q_tiles(q, out, kT, vt, b, h, [(2 * i * TILE_Q, TILE_Q), ((2 * i + 1) * TILE_Q, TILE_Q)], plan)
    rest = []
    if odd:
        rest.append((2 * n_pairs * TILE_Q, TILE_Q))
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


def _q_tiles(q, out, kT, vt, b, h, tiles, plan):
    """Query tiles [(q0, qn), ...] (one or two) of one head: online softmax over the key blocks
    each sees.  Rows q0..q0+qn-1 of tile t see keys < Sk (causal: < min(Sk, q0 + qn)).

    The (tile, step) items run as a software pipeline in program order: iteration i issues
    the scores of item i+2, the max / exp of item i+1, the p^T / p @ v of item i and the
    l / acc rescale of item i-1, so each in-order engine queue (TensorE, VectorE, ScalarE)
    holds independent work while an item's dependency chain runs; consecutive items belong
    to different tiles, which doubles the slack."""
    D, dt = plan.D, plan.dtype
    ctxs, steps = [], []
    for t in nl.static_range(len(tiles)):
        q0, qn = tiles[t]
        q_nat = nl.load(q[b, h, nl.ds(q0, qn), :])
        qT = nisa.tensor_copy(nisa.nc_transpose(q_nat))              # (D, qn) stationary, SBUF
        if plan.causal:
            # key j is masked for row i iff j > i
            k_end = min(plan.Sk, q0 + qn)
            masked = k_end - 1 > q0
        else:
            k_end = plan.Sk
            masked = False
        st = _key_steps(k_end, masked)
        # -(running max) after each step: one (qn, 1) tile per step, so reading step j's value
        # never waits on writing step j+1's
        neg_m = [nl.ndarray((qn, 1), nl.float32, buffer=nl.sbuf) for _ in st]
        l_run = nl.ndarray((qn, 1), nl.float32, buffer=nl.sbuf)
        acc = nl.ndarray((qn, D), nl.float32, buffer=nl.sbuf)
        ctxs.append((qT, kT, vt, neg_m, l_run, acc, q0, qn, plan))
        steps.append(st)
    items = _interleave([len(st) for st in steps])
    n = len(items)

    def stage1(i):
        t, j = items[i]
        return _step_scores(ctxs[t], steps[t][j])

    def stage2(i, sc):
        t, j = items[i]
        return _step_softmax(ctxs[t], j, steps[t][j], sc)

    scores = {0: stage1(0)}
    if n > 1:
        scores[1] = stage1(1)
    probs = {0: stage2(0, scores.pop(0))}
    done = None
    for i in nl.static_range(n):
        if i + 2 < n:
            scores[i + 2] = stage1(i + 2)
        if i + 1 < n:
            probs[i + 1] = stage2(i + 1, scores.pop(i + 1))
        t, j = items[i]
        pv = _step_pv(ctxs[t], steps[t][j], probs.pop(i))
        if done is not None:
            _step_update(*done)
        done = (ctxs[t], j, pv)
    _step_update(*done)

    for t in nl.static_range(len(tiles)):
        qT, kT_, vt_, neg_m, l_run, acc, q0, qn, _ = ctxs[t]
        l_safe = nisa.tensor_scalar(l_run, nl.maximum, 1e-30)
        o_tile = nisa.tensor_scalar(acc, nl.divide, l_safe, dtype=dt)
        nl.store(out[b, h, nl.ds(q0, qn), :], o_tile)


def _mask_pred(q0, qn, kb0, w):
    """Causal predicate of a (qn, w) score tile: query q0 + row >= key kb0 + column."""
    i_q = nl.arange(qn)[:, None]
    i_k = nl.arange(w)[None, :]
    return q0 + i_q >= kb0 + i_k


def _step_scores(ctx, blocks):
    """Stage 1 of a step: q k^T of its blocks (one PSUM bank each), causal mask on the last."""
    qT, kT, vt, neg_m, l_run, acc, q0, qn, plan = ctx
    fill = -MASK_FILL if plan.scale >= 0 else MASK_FILL
    scores = []
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        s = nisa.nc_matmul(qT, kT[:, kb0:kb0 + w])                     # (qn, w) fp32 PSUM
        if masked:
            s = nisa.affine_select(_mask_pred(q0, qn, kb0, w), s, fill)  # SBUF fp32
        scores.append(s)
    return scores


def _step_softmax(ctx, j, blocks, scores):
    """Stage 2 of step j: row extreme (VectorE), -m_new into neg_m[j], alpha = exp(m_old - m_new),
    p = exp(scale*s - m_new) in the input dtype with fp32 row sums (ScalarE, one instruction)."""
    qT, kT, vt, neg_ms, l_run, acc, q0, qn, plan = ctx
    scale, dt = plan.scale, plan.dtype
    reduce_op = nl.max if scale >= 0 else nl.min                       # extreme of scale * s
    mx = None
    for g in nl.static_range(len(blocks)):
        mx_g = nisa.tensor_reduce(reduce_op, scores[g], axis=1, keepdims=True)
        mx = mx_g if mx is None else nisa.tensor_tensor(mx, mx_g, reduce_op)
    neg_m = neg_ms[j]
    if j == 0:
        neg_m[...] = nisa.tensor_scalar(mx, nl.multiply, -scale)
        alpha = None
    else:
        # -m_new = min(-scale * extreme, -m_old)
        neg_m[...] = nisa.tensor_scalar(mx, nl.multiply, -scale, op1=nl.minimum, operand1=neg_ms[j - 1])
        alpha = nisa.activation(nl.exp, neg_ms[j - 1], bias=neg_m, scale=-1.0)   # exp(m_old - m_new)
    ps, rs = [], []
    for g in nl.static_range(len(blocks)):
        kb0, w, masked = blocks[g]
        rs_g = nl.ndarray((qn, 1), nl.float32, buffer=nl.sbuf)
        if masked and scale == 0:
            # scale 0 maps every score to exp(0) = 1: mask after the exp instead
            p = nisa.affine_select(_mask_pred(q0, qn, kb0, w),
                                   nisa.activation(nl.exp, scores[g], bias=neg_m, scale=0.0, dtype=dt), 0.0)
            rs_g[...] = nisa.tensor_reduce(nl.add, p, axis=1, keepdims=True)
        else:
            p = nisa.activation_reduce(nl.exp, scores[g], reduce_op=nl.add, reduce_res=rs_g,
                                       bias=neg_m, scale=scale, dtype=dt)  # (qn, w)
        ps.append(p)
        rs.append(rs_g)
    return ps, rs, alpha


def _step_pv(ctx, blocks, probs):
    """Stage 3 of a step: p^T per 128-key chunk (TensorE -> PSUM -> SBUF), o = p @ v (one PSUM
    accumulation group); returns (o, row sums, alpha) for :func:`_step_update`."""
    qT, kT, vt, neg_ms, l_run, acc, q0, qn, plan = ctx
    ps, rs, alpha = probs
    dt = plan.dtype
    nb = len(blocks)
    pT_pss = []
    for g in nl.static_range(nb):
        w = blocks[g][1]
        pT_ps = nl.ndarray((TILE_K, _cdiv(w, TILE_K), qn), dt, buffer=nl.psum)
        for c in nl.static_range(_cdiv(w, TILE_K)):
            kc = min(TILE_K, w - c * TILE_K)
            pT_ps[0:kc, c, :] = nisa.nc_transpose(ps[g][:, c * TILE_K:c * TILE_K + kc])
        pT_pss.append(pT_ps)
    pTs = []
    for g in nl.static_range(nb):
        w = blocks[g][1]
        full_ch, rem = divmod(w, TILE_K)
        pT = nl.ndarray((TILE_K, _cdiv(w, TILE_K), qn), dt, buffer=nl.sbuf)
        eng = _evict_engine(g)
        if full_ch:
            pT[:, 0:full_ch, :] = nisa.tensor_copy(pT_pss[g][:, 0:full_ch, :], engine=eng)
        if rem:
            pT[0:rem, full_ch, :] = nisa.tensor_copy(pT_pss[g][0:rem, full_ch, :], engine=eng)
        pTs.append(pT)
    o_ps = nl.zeros((qn, plan.D), nl.float32, buffer=nl.psum)
    for g in nl.static_range(nb):
        kb0, w, masked = blocks[g]
        t0 = kb0 // TILE_K
        for c in nl.static_range(_cdiv(w, TILE_K)):
            kc = min(TILE_K, w - c * TILE_K)
            o_ps += nisa.nc_matmul(pTs[g][0:kc, c, :], vt[0:kc, t0 + c, :])

    return o_ps, rs, alpha


def _step_update(ctx, j, pv):
    """Stage 4 of step j: l = alpha*l + rowsum, acc = alpha*acc + o (acc, l: fp32 SBUF)."""
    qT, kT, vt, neg_ms, l_run, acc, q0, qn, plan = ctx
    o_ps, rs, alpha = pv
    rsum = rs[0]
    for g in nl.static_range(1, len(rs)):
        rsum = nisa.tensor_tensor(rsum, rs[g], nl.add)
    if j == 0:
        l_run[...] = nisa.tensor_copy(rsum)
        acc[...] = nisa.tensor_copy(o_ps)
    else:
        l_run[...] = nisa.scalar_tensor_tensor(data=l_run, op0=nl.multiply, operand0=alpha, op1=nl.add,
                                               operand1=rsum)
        # acc = alpha * acc + o: the scaling on ScalarE, the add (one PSUM operand) on VectorE
        acc_s = nisa.activation(nl.copy, acc, scale=alpha)
        acc[...] = nisa.tensor_tensor(acc_s, o_ps, nl.add)


def _evict_engine(g: int):
    """Engine of the PSUM -> SBUF copy of p^T for block g of a step: alternate VectorE / ScalarE
    so that neither (VectorE has the row max, ScalarE the exp) becomes the bottleneck."""
    return nisa.vector_engine if g % 2 == 0 else nisa.scalar_engine
