"""Blocked-softmax (flash) attention forward for trn2, NKI 0.1.

Entry point: :func:`flash_attention` (``@nki.jit``).  The loop diagram is in
``attention_design.md`` next to this file.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nki_kernels.backend import nisa, nki, nl
from nki_kernels.kernels import tiling as T
from nki_kernels.kernels._checks import check_float, check_rank, check_same_dtype, fail

KERNEL = "flash_attention"

# -- tile constants (trn2, NeuronCore-v3; hardware sizes from kernels/tiling.py) ------------
TILE_Q = T.PMAX  # query rows per tile = partitions of a score tile
TILE_K = T.PMAX  # keys per p^T chunk = contraction of p @ v
KEY_BLOCK = T.MOVING_FMAX  # keys per score tile = one fp32 PSUM bank (512)
CHUNKS = KEY_BLOCK // TILE_K  # 4 p^T chunks per key block
STEP_BLOCKS = 2  # key blocks per online-softmax step (one rescale per 1,024 keys)
MAX_D = T.PMAX  # head dim = contraction of q k^T (partitions of q^T / k^T)
K_LOAD_TILES = 8  # 128-key tiles of k per load DMA during setup
# -- tuning (ours) ----------------------------------------------------------------------------
GROUP_TILES = {2: 4, 4: 2}  # query tiles per group by itemsize (fp32: 2, SBUF)
STATE_SETS = 2  # rotating per-group slot sets of the state (acc, ext, alpha, q^T)
SBUF_WORK = 48 * 1024  # bytes/partition for the pipeline working set (~44 KiB bf16, ~32 fp32)
MASK_FILL = 3.0e38  # -fill of masked (scaled) scores: finite, never a row's max
EVICT_DVE = {
    False: (1, 4),  # causal -> (a, b): a of every b TensorE-made p^T steps are evicted
    True: (1, 6),
}  # by VectorE, the rest by ScalarE (both also read PSUM for max / exp);
# cost-model tuned (S=4096 D=128 bf16): one eviction per step (all
# its p^T chunks in one 2 KiB PSUM bank); causal has fewer blocks
# per row max, so ScalarE takes more of them
# -- flags: constructs without public hardware evidence, OFF by default --------------------
USE_DMA_TRANSPOSE = False  # p^T of full 2-byte steps by one 3-D SBUF->SBUF dma_transpose
# (nki-samples keeps DMA transposes off on trn2; every AWS NKI 0.1
# DMA transpose is 2-D).  When on: DMA_T of every 5 full steps.
DMA_T = (4, 5)  # (a, b): share of full steps transposed by DMA when the flag is on


@dataclass(frozen=True)
class Rings:
    """Ring depths (slots) of the per-item buffers, by dtype."""

    p: int  # p = exp(...) in the input dtype, one step (1,024 keys) per slot
    pT: int  # TensorE-made p^T, one step per slot
    tri: int  # fp32 SBUF copies of masked diagonal triangles (128 x 128)
    score_items: int  # items whose score tiles (STEP_BLOCKS PSUM banks each) can be live at once
    ns: int  # per-tile step slots of ext (-m, block maxima) / alpha


RINGS = {2: Rings(p=8, pT=4, tri=2, score_items=3, ns=6), 4: Rings(p=2, pT=3, tri=2, score_items=2, ns=6)}


@dataclass(frozen=True)
class StageSchedule:
    """The software pipeline: iteration ``it`` issues stage s of item ``it + lag(s)``, so an
    item's chain (scores -> row extreme -> exp -> p^T -> p @ v -> acc update) is spread over
    6 iterations while every in-order engine queue holds other items' work."""

    scores: int = 5  # q k^T of the item's blocks (TensorE -> PSUM banks)
    extreme: int = 4  # negated row maxima and the running -m (VectorE)
    exp: int = 3  # alpha and p = exp(s - m), s pre-scaled (ScalarE)
    pT: int = 2  # p^T (TensorE transposes + an eviction, or the DMA-transpose flag)
    pv: int = 0  # [o | l] = p @ [V | 1] (TensorE -> PSUM)
    update: int = -1  # acc = alpha * acc + [o | l] (VectorE, reading PSUM)

    def lags(self) -> tuple:
        return (self.scores, self.extreme, self.exp, self.pT, self.pv, self.update)

    def check(self, rings: Rings) -> None:
        """Ring hazards (trace time): every slot is rewritten only after its last reader."""
        T.kernel_assert(self.scores - self.exp < rings.score_items, KERNEL, "score banks reused before exp")
        T.kernel_assert(rings.p > self.exp - self.pT, KERNEL, "p ring shorter than exp -> p^T")
        T.kernel_assert(rings.pT > self.pT - self.pv, KERNEL, "p^T ring shorter than p^T -> p @ v")
        T.kernel_assert(rings.ns > self.exp - self.update + 1, KERNEL, "step slots shorter than exp -> update")
        T.kernel_assert(
            self.extreme >= self.exp and rings.tri > self.extreme - self.exp,
            KERNEL,
            "triangle ring shorter than extreme -> exp",
        )


# fp32: one item fewer of score banks in flight (RINGS[4].score_items), so scores run 4 ahead
SCHEDULES = {2: StageSchedule(), 4: StageSchedule(scores=4, extreme=4)}


@dataclass(frozen=True)
class AttentionPlan:
    """Static sizes of one call (validated before any instruction)."""

    B: int  # batch
    H: int  # heads
    Sq: int  # query rows
    Sk: int  # keys / values
    D: int  # head dim (<= 128)
    dtype: object  # q's dtype (inputs, p, output)
    isz: int  # bytes per element
    causal: bool  # key j masked for query i iff j > i
    scale: float  # softmax scale (1/sqrt(D) by default)
    n_kt: int  # 128-key tiles of K^T / V
    resident: int  # bytes/partition of K^T + [V | 1]
    group_tiles: int  # query tiles per group
    rings: Rings  # per-item ring depths
    schedule: StageSchedule  # pipeline lags

    @property
    def tiles(self) -> list:
        """(first row, rows) of every query tile; only the last may be partial."""
        return list(T.spans(self.Sq, TILE_Q))

    @property
    def groups(self) -> list:
        n = len(self.tiles)
        return [list(range(g0, min(g0 + self.group_tiles, n))) for g0 in range(0, n, self.group_tiles)]


def resident_bytes(Sk: int, D: int, isz: int) -> int:
    """K^T (D partitions x Sk) + [V | 1] (128 partitions x ceil(Sk/128) x (D + 1)), per partition."""
    return Sk * isz + T.cdiv(Sk, TILE_K) * (D + 1) * isz


def max_keys(D: int, isz: int) -> int:
    """The largest Sk whose K^T and [V | 1] fit next to the working set (the plan's own rule)."""
    budget = T.SBUF_BYTES - SBUF_WORK
    lo, hi = 0, budget // isz + 1  # resident_bytes(hi) > budget
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if resident_bytes(mid, D, isz) <= budget else (lo, mid)
    return lo


def plan_attention(q: Any, k: Any, v: Any, causal: bool, softmax_scale: float | None) -> AttentionPlan:
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
            fail(
                KERNEL,
                name,
                f"batch/heads ({b_}, {h_}) but q has ({B}, {H})",
                "q, k and v with the same B and H (no grouped-query broadcasting)",
            )
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
            fail(
                KERNEL,
                "softmax_scale",
                f"{softmax_scale!r} of type {type(softmax_scale).__name__}",
                "None (1/sqrt(D)) or a finite real number",
            )
        scale = float(softmax_scale)
        if not math.isfinite(scale):
            fail(KERNEL, "softmax_scale", scale, "None (1/sqrt(D)) or a finite real number")
    isz = T.itemsize(dname)
    resident = resident_bytes(Sk, D, isz)
    budget = T.SBUF_BYTES - SBUF_WORK
    if resident > budget:
        fail(
            KERNEL,
            "k",
            f"Sk = {Sk}, D = {D}, {dname}: K^T and V need {resident} B per partition",
            f"Sk * itemsize + ceil(Sk/128) * (D + 1) * itemsize <= {budget} B (resident in SBUF): "
            f"Sk <= {max_keys(D, isz)} for D = {D} {dname}",
        )
    SCHEDULES[isz].check(RINGS[isz])
    return AttentionPlan(
        B=B,
        H=H,
        Sq=Sq,
        Sk=Sk,
        D=D,
        dtype=q.dtype,
        isz=isz,
        causal=bool(causal),
        scale=scale,
        n_kt=T.cdiv(Sk, TILE_K),
        resident=resident,
        group_tiles=GROUP_TILES[isz],
        rings=RINGS[isz],
        schedule=SCHEDULES[isz],
    )


@nki.jit
def flash_attention(q, k, v, causal=False, softmax_scale=None):
    """softmax(q k^T * scale [+ causal mask]) v with an online (blocked) softmax: 128-row query
    tiles against 512-key blocks, never an Sq x Sk buffer.

    Layout:
      q (B, H, Sq, D), k (B, H, Sk, D), v (B, H, Sk, D): HBM, one of fp32 / bf16 / fp16.
      returns (B, H, Sq, D) in q's dtype, HBM (nl.shared_hbm).
      On chip per head: K^T (D partitions x Sk) and [V | 1] (128 partitions = key within a
      128-key tile, ceil(Sk/128) tiles, D + 1: a ones column, so p @ [V | 1] also gives the row
      sums) resident in SBUF; per group of query tiles q^T and [o | l] accumulators.
    Tiling: (KEY_BLOCK=512, TILE_Q=TILE_K=128, STEP_BLOCKS=2, GROUP_TILES 4 (fp32 2);
             diagram in attention_design.md)
      per (b, h): K^T via TensorE transposes (8 x 128 keys per load DMA), [V | 1];
      then all (query tile, softmax step) items of the head as ONE static software pipeline
      (StageSchedule: stage s of item it + lag(s) in iteration it), groups of query tiles
      interleaved tile-fastest.  Per step of up to 2 key blocks (1,024 keys): two (128 x 512)
      fp32 score tiles in PSUM, p in an SBUF ring, p^T by 4 TensorE transposes per block
      into one PSUM bank per step (fp32: per block) + one eviction per bank (ScalarE; 1 in 4
      steps on VectorE, causal 1 in 6), one (128 x D+1) fp32 PSUM group for p @ [V | 1],
      accumulated without zeroing.
      Causal: blocks above the diagonal are never visited; only the last block of a tile is
      trimmed, and only its <= 128-key triangle is masked (on an SBUF copy).
      Every affine_range has >= 1 iteration; every tile operand indexes its base tile.
    Engines (2.26 ALU table, api/nki.api.shared.rst @ 49ee15c5): TensorE q k^T, p @ v and
      all transposes; VectorE scale * q^T, negated row max (PSUM), running -m, acc =
      alpha*acc + [o|l]
      (scalar_tensor_tensor reading PSUM), normalisation (reciprocal, multiply), part of the
      p^T evictions; ScalarE exp and alpha (activation), the rest of the p^T
      evictions, the first step's acc copy; GpSimd only affine_select (the causal mask, as in
      nki-samples flash_fwd), never arithmetic.
    Flags (module constants, OFF by default: no public hardware evidence):
      USE_DMA_TRANSPOSE  p^T of 4 in 5 full bf16/fp16 steps by one 3-D (2, 1, 0) SBUF->SBUF
                         dma_transpose instead of TensorE transposes + eviction.
    Constraints:
      hard (ValueError before any instruction): q/k/v not arrays; rank 4; fp32/bf16/fp16,
      one dtype; equal B, H, D; k and v with equal Sk; D <= 128; K^T + [V | 1] resident:
      Sk*itemsize + ceil(Sk/128)*(D+1)*itemsize <= 163,832 B per partition (max_keys(D, isz):
      D=128 Sk <= 20,352 fp32 / 40,765 bf16, D=64 Sk <= 27,136 fp32); causal a bool;
      softmax_scale None (1/sqrt(D)) or a finite real (0 and negative allowed).
      tested: Sq, Sk in 1..4,096 incl. non-multiples of 128 and Sq != Sk; D in {1, 32, 64,
      128}; B, H <= 2; strict interpreter mode.
    Numerics: q^T is scaled by softmax_scale when it is made (rounded to the input dtype, as
      nki-samples flash_fwd scales q), so PSUM holds scale * s and every extreme is a max
      (scale < 0 and scale = 0 need no special case); q k^T and p v on TensorE in the input
      dtype, fp32 PSUM accumulation; row max, exp,
      acc, l and the normalisation in fp32; p rounded to the input dtype before p v (as in
      FlashAttention) and l is the fp32 sum of those rounded p (the ones column of [V | 1]).
      Masked scores become -3e38 in an fp32 SBUF copy of the diagonal triangle (finite,
      exp -> 0); the running max is kept negated (-m, the exp bias) and starts at the first
      step's max (no -inf anywhere); out = acc * reciprocal(max(l, 1e-30)).  Tolerance vs
      the float64 oracle: nki_kernels/tolerances.py; bf16/fp16 within 2x a same-precision
      NumPy baseline.
    Pseudocode (per b, h):
      KT = transpose(k) (D x Sk); V1 = [v | 1] in 128-key tiles
      for each query tile (rows r0..r0+n), interleaved with its group:
        QT = scale * transpose(q[r0:r0+n])                     # D x n stationary
        for each step of <= 2 key blocks j (512 keys; causal: up to the diagonal):
          s_j = QT^T @ KT[:, j]                                # PSUM n x 512 fp32 (scaled)
          tri = where(row >= key, s_j[:, u:], -3e38)           # diagonal block only (SBUF)
          m_new = max(m, max_j rowmax(s_j))                    # VectorE
          alpha = exp(m - m_new)                               # ScalarE
          p_j = exp(s_j - m_new)                               # ScalarE, input dtype
          pT = transpose(p)                                    # TensorE -> PSUM -> SBUF
          [o | l]_step = p @ [V | 1]                           # one PSUM group n x (D+1)
          acc = alpha * acc + [o | l]_step;  m = m_new         # VectorE (first step: copy)
        out[r0:r0+n] = acc[:, :D] * (1 / max(acc[:, D], 1e-30))
    Cost notes: (cost-model ESTIMATES, no hardware) per 128 x 512 block VectorE's fp32 row max
      from PSUM and ScalarE's exp are the floors; p^T costs TensorE 4 transposes and a 512-
      element PSUM eviction per block (split VectorE/ScalarE by EVICT_DVE, one copy per step).  The README bench
      table has the current estimates and attention_design.md the engine-busy breakdown.
    """
    plan = plan_attention(q, k, v, causal, softmax_scale)
    out = nl.ndarray((plan.B, plan.H, plan.Sq, plan.D), plan.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(plan.B):
        for h in nl.affine_range(plan.H):
            _one_head(q, k, v, out, plan, b=b, h=h)
    return out


# ---- setup of one head: q loader, K^T, [V | 1] -------------------------------------------------


@dataclass
class _QLoader:
    """q rows of one group of query tiles into q_all (the full tiles in one DMA)."""

    q: Any
    b: Any
    h: Any
    plan: AttentionPlan
    q_all: Any = None

    def __post_init__(self):
        self.q_all = nl.ndarray((TILE_Q, self.plan.group_tiles, self.plan.D), self.plan.dtype, buffer=nl.sbuf)

    def load(self, gi: int) -> None:
        tiles, ts, D = self.plan.tiles, self.plan.groups[gi], self.plan.D
        nfull = sum(1 for t in ts if tiles[t][1] == TILE_Q)
        if nfull:
            i_p = nl.arange(TILE_Q)[:, None, None]
            i_t = nl.arange(nfull)[None, :, None]
            i_d = nl.arange(D)[None, None, :]
            nisa.dma_copy(
                dst=self.q_all[:, 0:nfull, :], src=self.q[self.b, self.h, tiles[ts[0]][0] + i_t * TILE_Q + i_p, i_d]
            )
        if nfull < len(ts):
            q0, qn = tiles[ts[-1]]
            nisa.dma_copy(dst=self.q_all[0:qn, len(ts) - 1, :], src=self.q[self.b, self.h, q0 : q0 + qn, :])


def _load_kT(k, kT, b, h, plan):
    """K^T (D x Sk): per load DMA up to K_LOAD_TILES 128-key tiles of k (partition = key within
    the tile), transposed on TensorE 4 tiles per PSUM bank, copied into K^T by VectorE."""
    D, Sk = plan.D, plan.Sk
    n_full, rem = T.split(Sk, TILE_K)
    i_p = nl.arange(TILE_K)[:, None, None]
    i_d = nl.arange(D)[None, None, :]
    for t0, nt in T.spans(n_full, K_LOAD_TILES):  # static: the last load may be short
        i_t = nl.arange(nt)[None, :, None]
        k_nat = nl.load(k[b, h, t0 * TILE_K + i_t * TILE_K + i_p, i_d])
        for c0, nc in T.spans(nt, CHUNKS):
            kT_ps = nl.ndarray((D, KEY_BLOCK), plan.dtype, buffer=nl.psum)
            for c in nl.static_range(nc):
                kT_ps[:, c * TILE_K : (c + 1) * TILE_K] = nisa.nc_transpose(k_nat[:, c0 + c, :])
            k0 = (t0 + c0) * TILE_K
            kT[:, k0 : k0 + nc * TILE_K] = nisa.tensor_copy(kT_ps[:, 0 : nc * TILE_K], engine=nisa.vector_engine)
    if rem:
        r0 = n_full * TILE_K
        k_rem = nl.load(k[b, h, r0:Sk, :])
        kT_ps = nl.ndarray((D, TILE_K), plan.dtype, buffer=nl.psum)
        kT_ps[:, 0:rem] = nisa.nc_transpose(k_rem)
        kT[:, r0:Sk] = nisa.tensor_copy(kT_ps[:, 0:rem], engine=nisa.vector_engine)


def _load_v1(v, vt, b, h, plan):
    """[V | 1]: tile t holds keys t*128 + p on partition p; column D = 1.0 (VectorE memset).
    The first step's keys in one DMA (the first p @ v needs them soon), the other full tiles
    in a second, the partial tile alone."""
    D, Sk = plan.D, plan.Sk
    vt[:, :, D : D + 1] = nisa.memset((TILE_K, plan.n_kt, 1), 1.0, plan.dtype, engine=nisa.vector_engine)
    n_full, rem = T.split(Sk, TILE_K)
    first = min(n_full, STEP_BLOCKS * CHUNKS)
    i_p = nl.arange(TILE_K)[:, None, None]
    i_d = nl.arange(D)[None, None, :]
    for t0, t1 in ((0, first), (first, n_full)):
        if t1 > t0:
            i_t = nl.arange(t1 - t0)[None, :, None]
            nisa.dma_copy(dst=vt[:, t0:t1, 0:D], src=v[b, h, (t0 + i_t) * TILE_K + i_p, i_d])
    if rem:
        r0 = n_full * TILE_K
        nisa.dma_copy(dst=vt[0:rem, n_full, 0:D], src=v[b, h, r0:Sk, :])


def _one_head(q, k, v, out, plan, *, b, h):
    """All query tiles of one (b, h) as ONE static software pipeline (no fill / drain between
    groups).  A function, so its resident K^T / [V | 1] die with it."""
    ql = _QLoader(q=q, b=b, h=h, plan=plan)
    ql.load(0)  # first on the DMA queue: the first q^T is the first thing TensorE needs
    kT = nl.ndarray((plan.D, plan.Sk), plan.dtype, buffer=nl.sbuf)
    vt = nl.ndarray((TILE_K, plan.n_kt, plan.D + 1), plan.dtype, buffer=nl.sbuf)
    _load_kT(k, kT, b, h, plan)
    _load_v1(v, vt, b, h, plan)
    _pipeline(ql, out, kT, vt, plan, b=b, h=h)


# ---- the static schedule (trace-time Python, no instruction) -----------------------------------


@dataclass(frozen=True)
class _Block:
    kb0: int  # first key
    w: int  # keys (<= 512)
    masked: bool  # crosses the causal diagonal


@dataclass(frozen=True)
class _Tile:
    """Per-query-tile context; the on-chip state lives in the head's group tensors, indexed
    by ``slot``."""

    t: int  # tile index in the head
    tl: int  # index within its group
    gi: int  # group
    q0: int  # first query row
    qn: int  # rows
    slot: int  # state slot (STATE_SETS rotating sets of group_tiles slots)
    qset: int  # q^T slot set (gi % STATE_SETS)


@dataclass(frozen=True)
class _Item:
    """One (query tile, softmax step) of the pipeline, as a stage sees it."""

    i: int  # index in the head's issue order
    tile: _Tile  # its query tile
    step: int  # softmax step of that tile
    blocks: list  # the step's key blocks (_Block)


def _key_steps(k_end: int, masked_last: bool) -> list:
    """Softmax steps of one query tile: up to STEP_BLOCKS key blocks of 512 each."""
    blocks = [_Block(kb0, min(KEY_BLOCK, k_end - kb0), False) for kb0 in range(0, k_end, KEY_BLOCK)]
    blocks[-1] = _Block(blocks[-1].kb0, blocks[-1].w, masked_last)
    return [blocks[i : i + STEP_BLOCKS] for i in range(0, len(blocks), STEP_BLOCKS)]


def _interleave(n_steps: list) -> list:
    """(tile, step) items, step-major: tile 0 step 0, tile 1 step 0, tile 0 step 1, ..."""
    return [(t, j) for j in range(max(n_steps)) for t in range(len(n_steps)) if j < n_steps[t]]


def _every(a: int, b: int, n: int) -> bool:
    """True for a of every b consecutive n (evenly spread)."""
    return (n * a) // b != ((n + 1) * a) // b


@dataclass
class _Program:
    """The head's static pipeline: items in issue order (None = bubble), per-tile contexts and
    key steps, and per-item choices (p^T by DMA, ring slots).  Built before any instruction."""

    tiles: list = field(default_factory=list)  # _Tile per query tile
    steps: list = field(default_factory=list)  # per tile: list of steps (lists of _Block)
    items: list = field(default_factory=list)  # (tile, step) or None
    g_first: list = field(default_factory=list)  # first item of each group
    g_last: list = field(default_factory=list)  # last item of each group
    dma: set = field(default_factory=set)  # items whose p^T is a DMA transpose (flag)
    pe_slot: dict = field(default_factory=dict)  # item -> p^T ring slot (TensorE-made)
    tri_slot: dict = field(default_factory=dict)  # item -> triangle ring slot
    dve_evict: set = field(default_factory=set)  # items whose p^T eviction is VectorE


def _program(plan: AttentionPlan) -> _Program:
    pg, S = _Program(), plan.schedule
    tiles, G = plan.tiles, plan.group_tiles
    for gi, ts in enumerate(plan.groups):
        # group-state hazard: group gi reuses the slot set of group gi - STATE_SETS, whose last
        # access is its last acc update (iteration g_last - S.update); gi's first access is
        # its q^T (iteration g_first - S.scores).  Pad short groups with bubbles.
        if gi >= STATE_SETS:
            while len(pg.items) - S.scores <= pg.g_last[gi - STATE_SETS] - S.update:
                pg.items.append(None)
        for tl, t in enumerate(ts):
            q0, qn = tiles[t]
            if plan.causal:
                k_end = min(plan.Sk, q0 + qn)  # key j is masked for row i iff j > i
                masked = k_end - 1 > q0
            else:
                k_end, masked = plan.Sk, False
            pg.tiles.append(
                _Tile(t=t, tl=tl, gi=gi, q0=q0, qn=qn, slot=(gi % STATE_SETS) * G + tl, qset=gi % STATE_SETS)
            )
            pg.steps.append(_key_steps(k_end, masked))
        pg.g_first.append(len(pg.items))
        pg.items += [(ts[t], j) for t, j in _interleave([len(pg.steps[t]) for t in ts])]
        pg.g_last.append(len(pg.items) - 1)
    for gi in range(STATE_SETS, len(plan.groups)):
        T.kernel_assert(
            pg.g_first[gi] - S.scores > pg.g_last[gi - STATE_SETS] - S.update,
            KERNEL,
            f"group {gi} reuses a state set still in use",
        )
    n_full_steps, n_evict = 0, 0
    for i, it in enumerate(pg.items):
        if it is None:
            continue
        t, j = it
        blocks = pg.steps[t][j]
        full = pg.tiles[t].qn == TILE_Q and len(blocks) == STEP_BLOCKS and all(bl.w == KEY_BLOCK for bl in blocks)
        if USE_DMA_TRANSPOSE and plan.isz == 2 and full and i < len(pg.items) - 1:
            if _every(*DMA_T, n_full_steps):
                pg.dma.add(i)
            n_full_steps += 1
        if i not in pg.dma:
            pg.pe_slot[i] = len(pg.pe_slot) % plan.rings.pT
            if _every(*EVICT_DVE[plan.causal], n_evict):
                pg.dve_evict.add(i)
            n_evict += 1
        if blocks[-1].masked:
            pg.tri_slot[i] = len(pg.tri_slot) % plan.rings.tri
    return pg


# ---- the pipeline --------------------------------------------------------------------------------


@dataclass
class _State:
    """On-chip tensors of the head's pipeline (allocated once; slots indexed statically)."""

    acc: object  # (128, slots, D+1) fp32: [o | l] accumulators per tile slot
    ext: object  # (128, slots, ns, STEP_BLOCKS+2) fp32, all negated: -m entering the step
    # (col 0; the exp bias), -block maxima (1..STEP_BLOCKS), -masked-triangle max (last)
    alpha: object  # (128, slots, ns) fp32: exp(m_prev - m)
    p_ring: object  # (128, rings.p, 1024) input dtype: p of one step per slot
    pT_ring: object  # (128 keys, rings.pT, 8 chunks, 128 queries) input dtype
    tri_ring: object  # (128, rings.tri, 128) fp32: masked triangle copies
    s_banks: list  # score_items * STEP_BLOCKS PSUM tiles (128, 512) fp32, in rotation
    qT_all: object  # (D, STATE_SETS, group_tiles, 128) input dtype: q^T per tile
    o_all: object  # (128, group_tiles, D) input dtype: normalised rows of a group
    kT: object  # (D, Sk) resident
    vt: object  # (128, n_kt, D+1) resident
    # results in flight between stages, keyed by item
    scores: dict = field(default_factory=dict)  # item -> [(bank index, width)]
    tri: dict = field(default_factory=dict)  # item -> (block, u)
    pT_dma: dict = field(default_factory=dict)  # item -> DMA-transposed p^T tile (flag)
    o_ps: dict = field(default_factory=dict)  # item -> [o | l] PSUM tile


def _pipeline(ql, out, kT, vt, plan, *, b, h):
    """All (tile, step) items of the head in program order; iteration ``it`` issues stage s of
    item ``it + lag(s)`` (StageSchedule), a group's q^T just before its first scores, each
    tile's normalisation right after its last acc update, one store per group."""
    D, dt, G, R = plan.D, plan.dtype, plan.group_tiles, plan.rings
    slots = STATE_SETS * G
    st = _State(
        acc=nl.ndarray((TILE_Q, slots, D + 1), nl.float32, buffer=nl.sbuf),
        ext=nl.ndarray((TILE_Q, slots, R.ns, STEP_BLOCKS + 2), nl.float32, buffer=nl.sbuf),
        alpha=nl.ndarray((TILE_Q, slots, R.ns), nl.float32, buffer=nl.sbuf),
        p_ring=nl.ndarray((TILE_Q, R.p, STEP_BLOCKS * KEY_BLOCK), dt, buffer=nl.sbuf),
        pT_ring=nl.ndarray((TILE_K, R.pT, STEP_BLOCKS * CHUNKS, TILE_Q), dt, buffer=nl.sbuf),
        tri_ring=nl.ndarray((TILE_Q, R.tri, TILE_K), nl.float32, buffer=nl.sbuf),
        s_banks=[
            nl.ndarray((TILE_Q, KEY_BLOCK), nl.float32, buffer=nl.psum) for _ in range(R.score_items * STEP_BLOCKS)
        ],
        qT_all=nl.ndarray((D, STATE_SETS, G, TILE_Q), dt, buffer=nl.sbuf),
        o_all=nl.ndarray((TILE_Q, G, D), dt, buffer=nl.sbuf),
        kT=kT,
        vt=vt,
    )
    pg = _program(plan)
    S = plan.schedule
    stages = (
        (_stage_scores, S.scores),
        (_stage_extreme, S.extreme),
        (_stage_exp, S.exp),
        (_stage_pT, S.pT),
        (_stage_pv, S.pv),
        (_stage_update, S.update),
    )
    lo, hi = min(S.lags()), max(S.lags())
    n = len(pg.items)
    prologue = {pg.g_first[gi] - S.scores: gi for gi in range(len(plan.groups))}
    epilogue = {pg.g_last[gi] - S.update: gi for gi in range(len(plan.groups))}
    last_item = {it[0]: i for i, it in enumerate(pg.items) if it is not None}
    tile_done = {i - S.update: t for t, i in last_item.items()}
    for it in nl.static_range(-hi, n - lo):
        if it in prologue:
            gi = prologue[it]
            for t in plan.groups[gi]:
                tc = pg.tiles[t]
                st.qT_all[:, tc.qset, tc.tl, 0 : tc.qn] = nisa.tensor_scalar(  # scale * q^T
                    nisa.nc_transpose(ql.q_all[0 : tc.qn, tc.tl, :]),
                    nl.multiply,
                    plan.scale,
                    dtype=plan.dtype,
                    engine=nisa.vector_engine,
                )
            if gi + 1 < len(plan.groups):
                ql.load(gi + 1)  # one group ahead (q is dead once its q^T is made)
        for fn, lag in stages:
            i = it + lag
            if 0 <= i < n and pg.items[i] is not None:
                t, j = pg.items[i]
                fn(st, pg, plan, _Item(i=i, tile=pg.tiles[t], step=j, blocks=pg.steps[t][j]))
        if it in tile_done:
            _normalise(st, plan, pg.tiles[tile_done[it]])
        if it in epilogue:
            _store(st, out, plan, b=b, h=h, ts=plan.groups[epilogue[it]], tiles=pg.tiles)


def _normalise(st, plan, tc):
    """out rows of one tile = acc[:, :D] * reciprocal(max(l, 1e-30)) -> o_all (VectorE)."""
    D, qn, s = plan.D, tc.qn, tc.slot
    l_safe = nisa.tensor_scalar(st.acc[0:qn, s, D : D + 1], nl.maximum, 1e-30, engine=nisa.vector_engine)
    inv_l = nisa.reciprocal(l_safe)
    st.o_all[0:qn, tc.tl, :] = nisa.tensor_scalar(
        st.acc[0:qn, s, 0:D], nl.multiply, inv_l, dtype=plan.dtype, engine=nisa.vector_engine
    )


def _store(st, out, plan, *, b, h, ts, tiles):
    """One store DMA for a group's full tiles (+ one for a partial tile)."""
    D = plan.D
    nfull = sum(1 for t in ts if tiles[t].qn == TILE_Q)
    if nfull:
        i_p = nl.arange(TILE_Q)[:, None, None]
        i_t = nl.arange(nfull)[None, :, None]
        i_d = nl.arange(D)[None, None, :]
        nisa.dma_copy(dst=out[b, h, tiles[ts[0]].q0 + i_t * TILE_Q + i_p, i_d], src=st.o_all[:, 0:nfull, :])
    if nfull < len(ts):
        tc = tiles[ts[-1]]
        nisa.dma_copy(dst=out[b, h, tc.q0 : tc.q0 + tc.qn, :], src=st.o_all[0 : tc.qn, len(ts) - 1, :])


def _mask_pred(q0, qn, kb0, w):
    """Causal predicate of a (qn, w) score tile: query q0 + row >= key kb0 + column."""
    i_q = nl.arange(qn)[:, None]
    i_k = nl.arange(w)[None, :]
    return q0 + i_q >= kb0 + i_k


def _split(tc, bl):
    """A masked (diagonal) block = an unmasked rectangle of u columns (keys kb0 .. q0-1, seen by
    every row; u a multiple of 128, possibly 0) + a triangle of w - u <= qn columns (keys
    q0 ..), the only part that needs the causal mask."""
    u = tc.q0 - bl.kb0
    T.kernel_assert(0 <= u < bl.w and bl.w - u <= tc.qn, KERNEL, f"diagonal block {bl} for rows {tc.q0}+{tc.qn}")
    return u


def _bank(st, plan, i, g):
    return st.s_banks[(i % plan.rings.score_items) * STEP_BLOCKS + g]


def _stage_scores(st, pg, plan, item):
    """s_g = q^T^T @ K^T[:, block g]: one PSUM bank per block (a single matmul writes it)."""
    i, tc, blocks = item.i, item.tile, item.blocks
    for g in nl.static_range(len(blocks)):
        bl = blocks[g]
        _bank(st, plan, i, g)[0 : tc.qn, 0 : bl.w] = nisa.nc_matmul(
            st.qT_all[:, tc.qset, tc.tl, 0 : tc.qn], st.kT[:, bl.kb0 : bl.kb0 + bl.w]
        )


def _stage_extreme(st, pg, plan, item):
    """Negated row max of each block of (pre-scaled) scores into columns 1.. of the step's ext
    slot (VectorE tensor_reduce(max, negate=True), from PSUM).  A masked diagonal block: the
    max of its unmasked rectangle from PSUM; its triangle is copied to SBUF (fp32, VectorE),
    masked by affine_select (GpSimd, SBUF only) and reduced (VectorE) into the extra column.
    Then -m_j = min(-m_{j-1}, -block maxima) into column 0 of the next slot: the exp bias
    itself, so no separate -m instruction."""
    i, tc, j, blocks = item.i, item.tile, item.step, item.blocks
    qn, s_t, nb = tc.qn, tc.slot, len(blocks)
    slot, nxt = j % plan.rings.ns, (j + 1) % plan.rings.ns
    hi = nb + 1
    for g in nl.static_range(nb):
        bl, bank = blocks[g], _bank(st, plan, i, g)
        if not bl.masked:
            st.ext[0:qn, s_t, slot, 1 + g : 2 + g] = nisa.tensor_reduce(
                nl.max, bank[0:qn, 0 : bl.w], axis=1, negate=True, keepdims=True
            )
            continue
        u = _split(tc, bl)
        col = 1 + g
        if u:
            st.ext[0:qn, s_t, slot, col : col + 1] = nisa.tensor_reduce(
                nl.max, bank[0:qn, 0:u], axis=1, negate=True, keepdims=True
            )
            col, hi = nb + 1, nb + 2  # the triangle's max goes to the extra column
        r, tw = pg.tri_slot[i], bl.w - u
        st.tri_ring[0:qn, r, 0:tw] = nisa.tensor_copy(bank[0:qn, u : bl.w], engine=nisa.vector_engine)
        st.tri_ring[0:qn, r, 0:tw] = nisa.affine_select(
            _mask_pred(tc.q0, qn, bl.kb0 + u, tw), st.tri_ring[0:qn, r, 0:tw], -MASK_FILL
        )
        st.ext[0:qn, s_t, slot, col : col + 1] = nisa.tensor_reduce(
            nl.max, st.tri_ring[0:qn, r, 0:tw], axis=1, negate=True, keepdims=True
        )
        st.tri[i] = (g, u)
    lo = 0 if j > 0 else 1
    st.ext[0:qn, s_t, nxt, 0:1] = nisa.tensor_reduce(nl.min, st.ext[0:qn, s_t, slot, lo:hi], axis=1, keepdims=True)


def _stage_exp(st, pg, plan, item):
    """alpha_j = exp(m_{j-1} - m_j) and p = exp(s - m_j) in the input dtype (ScalarE; s is
    already scaled: q^T carries the softmax scale); a masked block's triangle is read from
    its masked SBUF copy."""
    i, tc, j, blocks = item.i, item.tile, item.step, item.blocks
    dt, qn, s_t = plan.dtype, tc.qn, tc.slot
    slot, nxt, r = j % plan.rings.ns, (j + 1) % plan.rings.ns, i % plan.rings.p
    bias = st.ext[0:qn, s_t, nxt, 0:1]  # -m_j
    if j > 0:
        st.alpha[0:qn, s_t, slot : slot + 1] = nisa.activation(
            nl.exp,
            st.ext[0:qn, s_t, slot, 0:1],  # -m_{j-1}
            bias=bias,
            scale=-1.0,
        )
    tri = st.tri.pop(i, None)
    for g in nl.static_range(len(blocks)):
        bl, bank = blocks[g], _bank(st, plan, i, g)
        c0 = g * KEY_BLOCK
        if not bl.masked:
            st.p_ring[0:qn, r, c0 : c0 + bl.w] = nisa.activation(nl.exp, bank[0:qn, 0 : bl.w], bias=bias, dtype=dt)
            continue
        _, u = tri
        tw, rt = bl.w - u, pg.tri_slot[i]
        if u:
            st.p_ring[0:qn, r, c0 : c0 + u] = nisa.activation(nl.exp, bank[0:qn, 0:u], bias=bias, dtype=dt)
        st.p_ring[0:qn, r, c0 + u : c0 + bl.w] = nisa.activation(
            nl.exp, st.tri_ring[0:qn, rt, 0:tw], bias=bias, dtype=dt
        )


def _stage_pT(st, pg, plan, item):
    """p^T of item i: 128-key chunks on TensorE into PSUM tiles of one bank each (the whole
    step for 2-byte p, one block for fp32), each evicted into the p^T ring by one VectorE or
    ScalarE copy (EVICT_DVE picks the engine per step); with USE_DMA_TRANSPOSE, one 3-D DMA transpose
    of the whole step for the items the program picked."""
    i, tc, blocks = item.i, item.tile, item.blocks
    dt, qn, r = plan.dtype, tc.qn, i % plan.rings.p
    if i in pg.dma:
        nch = len(blocks) * CHUNKS
        st.pT_dma[i] = nisa.dma_transpose(st.p_ring[0:qn, r, :].reshape((qn, nch, TILE_K)), axes=(2, 1, 0))
        return
    rt = pg.pe_slot[i]
    chunks = [
        (g * KEY_BLOCK + c * TILE_K, min(TILE_K, bl.w - c * TILE_K))
        for g, bl in enumerate(blocks)
        for c in range(T.cdiv(bl.w, TILE_K))
    ]
    eng = nisa.vector_engine if i in pg.dve_evict else nisa.scalar_engine
    per = T.PSUM_BANK_BYTES // (TILE_Q * plan.isz)  # chunks per PSUM bank: 8 (2-byte), 4 (fp32)
    for b0, nb in T.spans(len(chunks), per):
        pT_ps = nl.ndarray((TILE_K, per, qn), dt, buffer=nl.psum)
        for c in nl.static_range(nb):
            c0, kc = chunks[b0 + c]
            pT_ps[0:kc, c, :] = nisa.nc_transpose(st.p_ring[0:qn, r, c0 : c0 + kc])
        # every chunk but possibly the step's last is a full 128 keys
        full = sum(1 for _, kc in chunks[b0 : b0 + nb] if kc == TILE_K)
        if full:
            st.pT_ring[:, rt, b0 : b0 + full, 0:qn] = nisa.tensor_copy(pT_ps[:, 0:full, :], engine=eng)
        if full < nb:
            kc = chunks[b0 + nb - 1][1]
            st.pT_ring[0:kc, rt, b0 + full, 0:qn] = nisa.tensor_copy(pT_ps[0:kc, full, :], engine=eng)


def _stage_pv(st, pg, plan, item):
    """[o | l] of item i = p @ [V | 1]: one PSUM accumulation group; the first ``+=`` into the
    never-written PSUM tile overwrites it (documented accumulation rule), so no zeroing; read
    by the update stage."""
    i, tc, blocks = item.i, item.tile, item.blocks
    D, qn = plan.D, tc.qn
    o_ps = nl.ndarray((qn, D + 1), nl.float32, buffer=nl.psum)
    pT_dma = st.pT_dma.pop(i, None)
    for g in nl.static_range(len(blocks)):
        bl = blocks[g]
        t0 = bl.kb0 // TILE_K
        for c in nl.static_range(T.cdiv(bl.w, TILE_K)):
            kc, ch = min(TILE_K, bl.w - c * TILE_K), g * CHUNKS + c
            if pT_dma is not None:
                stationary = pT_dma[0:kc, ch, 0:qn]
            else:
                stationary = st.pT_ring[0:kc, pg.pe_slot[i], ch, 0:qn]
            o_ps += nisa.nc_matmul(stationary, st.vt[0:kc, t0 + c, :])
    st.o_ps[i] = o_ps


def _stage_update(st, pg, plan, item):
    """acc = alpha_j * acc + [o | l] (VectorE scalar_tensor_tensor, [o | l] read from PSUM);
    the first step copies [o | l] into acc (ScalarE)."""
    i, tc, j = item.i, item.tile, item.step
    qn, s_t = tc.qn, tc.slot
    o_ps = st.o_ps.pop(i)
    if j == 0:
        st.acc[0:qn, s_t, :] = nisa.activation(nl.copy, o_ps)
        return
    slot = j % plan.rings.ns
    st.acc[0:qn, s_t, :] = nisa.scalar_tensor_tensor(
        data=st.acc[0:qn, s_t, :],
        op0=nl.multiply,
        operand0=st.alpha[0:qn, s_t, slot : slot + 1],
        op1=nl.add,
        operand1=o_ps,
    )
