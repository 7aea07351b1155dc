"""Blocked-softmax (flash) attention forward in NKI 0.7 (``import nki``): the NKI 0.7
generation of ``attention.py``, same plan, software pipeline, limits, numerics and engines.

Shared with the 0.1 kernel: the input checks and the plan (:func:`attention.plan_attention`:
query tiles and groups, 512-key blocks in steps of two, ring depths, the stage schedule and its
hazard checks) and the static program (:func:`attention._program`: which (tile, step) item each
pipeline iteration issues, ring slots, p^T evictions per engine), both computed on the host
(``_nki07``) and handed to the kernel as tuples; the oracle, shapes and tolerance table.

NKI 0.7 here: destination-first ISA calls; ``nc_matmul(accumulate=False)`` starts the score
banks and each [o | l] group (no ``nl.zeros``); the causal triangle is masked by
``affine_select(pattern=[[-1, w]], channel_multiplier=1, offset=q0 - k0,
cmp_op=nl.greater_equal)`` (keep key k0 + col for query q0 + row iff row - col + q0 - k0 >= 0);
strided HBM loads and stores are access patterns (``.ap``), not ``nl.arange`` grids; the
normalisation is ``reciprocal`` then a per-row multiply (no divide); results in flight between
pipeline stages are lists of tiles; loops are ``range`` loops.  As in the 0.1 kernel, q^T
carries softmax_scale (so every extreme is a max), the running max is kept negated (it is the
exp bias), and the p^T chunks of a step share one PSUM bank per eviction.

Engines (0.6 ISA reference): TensorE (q k^T, p @ [V | 1], every transpose), VectorE (scale *
q^T, negated row maxima from PSUM, running -m, acc update, normalisation, part of the p^T evictions),
ScalarE (exp, alpha, the other evictions), GpSimd only for ``affine_select`` (SBUF), DMA.  The
0.1 kernel's ``USE_DMA_TRANSPOSE`` flag has no 0.7 counterpart: with it set, this kernel refuses
to run (ValueError) rather than silently differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_kernels.backend import resolve
from nki_kernels.kernels import attention as attn01
from nki_kernels.kernels import tiling as T
from nki_kernels.kernels._nki07 import HostEntry, host_spec
from nki_kernels.kernels.attention import (
    CHUNKS,
    K_LOAD_TILES,
    KEY_BLOCK,
    MASK_FILL,
    STATE_SETS,
    STEP_BLOCKS,
    TILE_K,
    TILE_Q,
    plan_attention,
)

nki, nl, nisa = resolve("0.7").modules  # the real `nki` on a device, the interpreter elsewhere


@dataclass
class AttentionTiling(nl.NKIObject):  # type: ignore[name-defined]  # nl: the resolved API module
    """The plan and program of one call, as ints, floats, bools and tuples."""

    B: int
    H: int
    Sq: int
    Sk: int
    D: int
    scale: float
    n_kt: int  # 128-key tiles of K^T / [V | 1]
    group_tiles: int  # query tiles per group
    ring_p: int  # p ring slots (one step each)
    ring_pT: int  # p^T ring slots
    ring_tri: int  # masked-triangle copies
    score_items: int  # items whose score banks are live at once
    ring_ns: int  # per-tile step slots of ext (-m, block maxima) / alpha
    lags: tuple  # stage lags: scores, extreme, exp, pT, pv, update
    groups: tuple  # per group: its tile indices
    tiles: tuple  # per tile: (t, tl, gi, q0, qn, slot, qset)
    steps: tuple  # per tile: its steps, each ((kb0, w, masked), ...)
    items: tuple  # issue order: (tile, step) or None (a bubble)
    pe_slot: tuple  # per item: p^T ring slot (-1 for bubbles)
    tri_slot: tuple  # per item: triangle ring slot (-1 when unmasked)
    dve_evict: tuple  # per item: whether VectorE (else ScalarE) evicts its p^T
    pT_bank: int  # p^T chunks per PSUM bank: 8 (2-byte p), 4 (fp32)
    pT_banks: tuple  # per item: per PSUM bank of its p^T, (first chunk, ((c0, kc), ...)):
    # chunk = its index in the step's p^T ring slot, c0 its first key, kc keys
    prologue_at: tuple  # per group: iteration that makes its q^T (and loads the next group's q)
    epilogue_at: tuple  # per group: iteration that stores it
    done_at: tuple  # per tile: iteration that normalises it


def _tiling(plan, pg) -> AttentionTiling:
    S, R = plan.schedule, plan.rings
    n = len(pg.items)
    last = {}
    for i in range(n):
        if pg.items[i] is not None:
            last[pg.items[i][0]] = i
    per = T.PSUM_BANK_BYTES // (TILE_Q * plan.isz)  # the 0.1 kernel's p^T bank split
    items, banks = [], []
    for i in range(n):
        it = pg.items[i]
        items.append(None if it is None else (it[0], it[1]))
        blocks = () if it is None else pg.steps[it[0]][it[1]]
        chunks = tuple(
            (g * KEY_BLOCK + c * TILE_K, min(TILE_K, bl.w - c * TILE_K))
            for g, bl in enumerate(blocks)
            for c in range(T.cdiv(bl.w, TILE_K))
        )
        banks.append(tuple((b0, chunks[b0 : b0 + nb]) for b0, nb in T.spans(len(chunks), per)))
    return AttentionTiling(
        B=plan.B,
        H=plan.H,
        Sq=plan.Sq,
        Sk=plan.Sk,
        D=plan.D,
        scale=plan.scale,
        n_kt=plan.n_kt,
        group_tiles=plan.group_tiles,
        ring_p=R.p,
        ring_pT=R.pT,
        ring_tri=R.tri,
        score_items=R.score_items,
        ring_ns=R.ns,
        lags=S.lags(),
        groups=tuple(tuple(g) for g in plan.groups),
        tiles=tuple((c.t, c.tl, c.gi, c.q0, c.qn, c.slot, c.qset) for c in pg.tiles),
        steps=tuple(tuple(tuple((bl.kb0, bl.w, bl.masked) for bl in step) for step in steps) for steps in pg.steps),
        items=tuple(items),
        pe_slot=tuple(pg.pe_slot.get(i, -1) for i in range(n)),
        tri_slot=tuple(pg.tri_slot.get(i, -1) for i in range(n)),
        dve_evict=tuple(i in pg.dve_evict for i in range(n)),
        pT_bank=per,
        pT_banks=tuple(banks),
        prologue_at=tuple(pg.g_first[gi] - S.scores for gi in range(len(plan.groups))),
        epilogue_at=tuple(pg.g_last[gi] - S.update for gi in range(len(plan.groups))),
        done_at=tuple(last[c.t] - S.update for c in pg.tiles),
    )


def _prepare(q, k, v, causal=False, softmax_scale=None):
    """attention.py's checks and plan (same ValueErrors) and its static program."""
    if attn01.USE_DMA_TRANSPOSE:
        raise ValueError(
            "flash_attention (NKI 0.7): attention.USE_DMA_TRANSPOSE is set, but the NKI 0.7 "
            "kernel has no DMA-transpose path; allowed: the default (False)"
        )
    plan = plan_attention(host_spec(q), host_spec(k), host_spec(v), causal, softmax_scale)
    return (q, k, v, _tiling(plan, attn01._program(plan))), {}


# ---- the kernel -------------------------------------------------------------------------------


@nki.jit
def attention_kernel(q, k, v, t):
    """The device kernel behind :data:`flash_attention`; ``t`` is an AttentionTiling."""
    out = nl.ndarray((t.B, t.H, t.Sq, t.D), dtype=q.dtype, buffer=nl.shared_hbm)
    for b in range(t.B):
        for h in range(t.H):
            _one_head(q, k, v, out, b, h, t)
    return out


def _rows(x, b, h, r0, ntiles, t_rows, width):
    """Access pattern of ``ntiles`` 128-row tiles of x[b, h] (rows r0 .., width columns) as
    (row within the tile [partition], tile, column)."""
    base = ((b * x.shape[1] + h) * t_rows + r0) * width
    return x.ap(pattern=[[width, TILE_Q], [TILE_Q * width, ntiles], [1, width]], offset=base)


def _load_q(q, q_all, b, h, t, gi):
    """q rows of one group of query tiles into q_all (its full tiles in one DMA)."""
    ts = t.groups[gi]
    nfull = 0
    for x in ts:
        if t.tiles[x][4] == TILE_Q:
            nfull += 1
    if nfull:
        nisa.dma_copy(dst=q_all[:, 0:nfull, :], src=_rows(q, b, h, t.tiles[ts[0]][3], nfull, t.Sq, t.D))
    if nfull < len(ts):
        q0, qn = t.tiles[ts[-1]][3], t.tiles[ts[-1]][4]
        nisa.dma_copy(dst=q_all[0:qn, len(ts) - 1, :], src=q[b, h, q0 : q0 + qn, :])


def _load_kT(k, kT, b, h, t):
    """K^T (D x Sk): up to K_LOAD_TILES 128-key tiles of k per DMA, transposed on TensorE four
    tiles per PSUM bank, copied into K^T by VectorE."""
    D, Sk = t.D, t.Sk
    n_full, rem = Sk // TILE_K, Sk % TILE_K
    for t0 in range(0, n_full, K_LOAD_TILES):
        nt = min(K_LOAD_TILES, n_full - t0)
        k_nat = nl.ndarray((TILE_K, nt, D), dtype=k.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_nat, src=_rows(k, b, h, t0 * TILE_K, nt, Sk, D))
        for c0 in range(0, nt, CHUNKS):
            nc = min(CHUNKS, nt - c0)
            kT_ps = nl.ndarray((D, KEY_BLOCK), dtype=k.dtype, buffer=nl.psum)
            for c in range(nc):
                nisa.nc_transpose(dst=kT_ps[:, c * TILE_K : (c + 1) * TILE_K], data=k_nat[:, c0 + c, :])
            k0 = (t0 + c0) * TILE_K
            nisa.tensor_copy(dst=kT[:, k0 : k0 + nc * TILE_K], src=kT_ps[:, 0 : nc * TILE_K], engine=nisa.engine.vector)
    if rem:
        r0 = n_full * TILE_K
        k_rem = nl.ndarray((rem, D), dtype=k.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_rem, src=k[b, h, r0:Sk, :])
        kT_ps = nl.ndarray((D, TILE_K), dtype=k.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=kT_ps[:, 0:rem], data=k_rem)
        nisa.tensor_copy(dst=kT[:, r0:Sk], src=kT_ps[:, 0:rem], engine=nisa.engine.vector)


def _load_v1(v, vt, b, h, t):
    """[V | 1]: tile i holds keys i*128 + p on partition p; column D = 1.0.  The first step's
    keys in one DMA, the other full tiles in a second, the partial tile alone."""
    D, Sk = t.D, t.Sk
    nisa.memset(dst=vt[:, :, D : D + 1], value=1.0, engine=nisa.engine.vector)
    n_full, rem = Sk // TILE_K, Sk % TILE_K
    first = min(n_full, STEP_BLOCKS * CHUNKS)
    for t0, t1 in ((0, first), (first, n_full)):
        if t1 > t0:
            nisa.dma_copy(dst=vt[:, t0:t1, 0:D], src=_rows(v, b, h, t0 * TILE_K, t1 - t0, Sk, D))
    if rem:
        r0 = n_full * TILE_K
        nisa.dma_copy(dst=vt[0:rem, n_full, 0:D], src=v[b, h, r0:Sk, :])


def _one_head(q, k, v, out, b, h, t):
    """All query tiles of one (b, h) as one static software pipeline; the head's resident
    K^T / [V | 1] die with this function."""
    q_all = nl.ndarray((TILE_Q, t.group_tiles, t.D), dtype=q.dtype, buffer=nl.sbuf)
    _load_q(q, q_all, b, h, t, 0)  # first on the DMA queue: the first q^T is TensorE's first need
    kT = nl.ndarray((t.D, t.Sk), dtype=k.dtype, buffer=nl.sbuf)
    vt = nl.ndarray((TILE_K, t.n_kt, t.D + 1), dtype=v.dtype, buffer=nl.sbuf)
    _load_kT(k, kT, b, h, t)
    _load_v1(v, vt, b, h, t)
    _pipeline(q, q_all, out, kT, vt, b, h, t)


# ---- the pipeline -----------------------------------------------------------------------------


class _State(nl.NKIObject):  # type: ignore[name-defined]  # nl: the resolved API module
    """The head's on-chip tensors (allocated once; slots indexed statically) and the results
    in flight between stages (lists indexed by item)."""

    def __init__(self, t, dt, kT, vt):
        D, G = t.D, t.group_tiles
        slots = STATE_SETS * G
        self.acc = nl.ndarray((TILE_Q, slots, D + 1), dtype=nl.float32, buffer=nl.sbuf)
        self.ext = nl.ndarray((TILE_Q, slots, t.ring_ns, STEP_BLOCKS + 2), dtype=nl.float32, buffer=nl.sbuf)
        self.alpha = nl.ndarray((TILE_Q, slots, t.ring_ns), dtype=nl.float32, buffer=nl.sbuf)
        self.p_ring = nl.ndarray((TILE_Q, t.ring_p, STEP_BLOCKS * KEY_BLOCK), dtype=dt, buffer=nl.sbuf)
        self.pT_ring = nl.ndarray((TILE_K, t.ring_pT, STEP_BLOCKS * CHUNKS, TILE_Q), dtype=dt, buffer=nl.sbuf)
        self.tri_ring = nl.ndarray((TILE_Q, t.ring_tri, TILE_K), dtype=nl.float32, buffer=nl.sbuf)
        self.s_banks = []
        for i in range(t.score_items * STEP_BLOCKS):
            self.s_banks.append(nl.ndarray((TILE_Q, KEY_BLOCK), dtype=nl.float32, buffer=nl.psum, name=f"s_bank{i}"))
        self.qT_all = nl.ndarray((D, STATE_SETS, G, TILE_Q), dtype=dt, buffer=nl.sbuf)
        self.o_all = nl.ndarray((TILE_Q, G, D), dtype=dt, buffer=nl.sbuf)
        self.kT, self.vt = kT, vt
        self.tri = []  # item -> (block, u) of its masked block, set by the extreme stage
        self.o_ps = []  # item -> its [o | l] PSUM tile, set by the p @ v stage
        for _ in range(len(t.items)):
            self.tri.append(None)
            self.o_ps.append(None)


def _pipeline(q, q_all, out, kT, vt, b, h, t):
    """Iteration ``it`` issues stage s of item ``it + lags[s]``; a group's q^T just before its
    first scores, each tile's normalisation right after its last update, one store per group."""
    st = _State(t, q.dtype, kT, vt)
    stages = (_stage_scores, _stage_extreme, _stage_exp, _stage_pT, _stage_pv, _stage_update)
    n = len(t.items)
    for it in range(-max(t.lags), n - min(t.lags)):
        for gi in range(len(t.groups)):
            if t.prologue_at[gi] == it:
                _make_qT(st, q_all, t, gi)
                if gi + 1 < len(t.groups):
                    _load_q(q, q_all, b, h, t, gi + 1)  # one group ahead
        for s in range(len(stages)):
            i = it + t.lags[s]
            if 0 <= i < n and t.items[i] is not None:
                x, j = t.items[i]
                stages[s](st, t, i, t.tiles[x], j, t.steps[x][j])
        for x in range(len(t.tiles)):
            if t.done_at[x] == it:
                _normalise(st, t, t.tiles[x])
        for gi in range(len(t.groups)):
            if t.epilogue_at[gi] == it:
                _store(st, out, b, h, t, gi)


def _make_qT(st, q_all, t, gi):
    """scale * q^T of every tile of group gi (TensorE transpose; VectorE multiplies it by
    softmax_scale into its slot set, rounding to the input dtype), so PSUM scores are scaled."""
    for x in t.groups[gi]:
        tl, qn, qset = t.tiles[x][1], t.tiles[x][4], t.tiles[x][6]
        qT_ps = nl.ndarray((t.D, TILE_Q), dtype=q_all.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=qT_ps[:, 0:qn], data=q_all[0:qn, tl, :])
        nisa.tensor_scalar(
            dst=st.qT_all[:, qset, tl, 0:qn],
            data=qT_ps[:, 0:qn],
            op0=nl.multiply,
            operand0=t.scale,
            engine=nisa.engine.vector,
        )


def _normalise(st, t, tile):
    """out rows of one tile = acc[:, :D] * reciprocal(max(l, 1e-30)) -> o_all (VectorE)."""
    D, tl, qn, s = t.D, tile[1], tile[4], tile[5]
    l_safe = nl.ndarray((TILE_Q, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(
        dst=l_safe[0:qn, :], data=st.acc[0:qn, s, D : D + 1], op0=nl.maximum, operand0=1e-30, engine=nisa.engine.vector
    )
    inv_l = nl.ndarray((TILE_Q, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv_l[0:qn, :], data=l_safe[0:qn, :])
    nisa.tensor_scalar(
        dst=st.o_all[0:qn, tl, :],
        data=st.acc[0:qn, s, 0:D],
        op0=nl.multiply,
        operand0=inv_l[0:qn, :],
        engine=nisa.engine.vector,
    )


def _store(st, out, b, h, t, gi):
    """One store DMA for the group's full tiles (+ one for a partial tile)."""
    ts = t.groups[gi]
    nfull = 0
    for x in ts:
        if t.tiles[x][4] == TILE_Q:
            nfull += 1
    if nfull:
        nisa.dma_copy(dst=_rows(out, b, h, t.tiles[ts[0]][3], nfull, t.Sq, t.D), src=st.o_all[:, 0:nfull, :])
    if nfull < len(ts):
        q0, qn = t.tiles[ts[-1]][3], t.tiles[ts[-1]][4]
        nisa.dma_copy(dst=out[b, h, q0 : q0 + qn, :], src=st.o_all[0:qn, len(ts) - 1, :])


def _bank(st, t, i, g):
    return st.s_banks[(i % t.score_items) * STEP_BLOCKS + g]


def _stage_scores(st, t, i, tile, j, blocks):
    """s_g = (q^T)^T @ K^T[:, block g]: one PSUM bank per block, written by one matmul."""
    tl, qn, qset = tile[1], tile[4], tile[6]
    for g in range(len(blocks)):
        kb0, w = blocks[g][0], blocks[g][1]
        nisa.nc_matmul(
            dst=_bank(st, t, i, g)[0:qn, 0:w],
            stationary=st.qT_all[:, qset, tl, 0:qn],
            moving=st.kT[:, kb0 : kb0 + w],
            accumulate=False,
        )


def _mask_triangle(dst, src, q0, k0, w, fill):
    """dst = src where query q0 + row >= key k0 + column, else ``fill`` (GpSimd, SBUF)."""
    nisa.affine_select(
        dst=dst,
        pattern=[[-1, w]],
        channel_multiplier=1,
        on_true_tile=src,
        on_false_value=fill,
        cmp_op=nl.greater_equal,
        offset=q0 - k0,
    )


def _stage_extreme(st, t, i, tile, j, blocks):
    """Negated row max of each block of (pre-scaled) scores into columns 1.. of the step's ext
    slot (VectorE ``tensor_reduce(max, negate=True)`` from PSUM); a masked diagonal block: its
    unmasked rectangle from PSUM, its triangle copied to SBUF, masked and reduced into the
    extra column.  Then -m_j = min(-m_{j-1}, -block maxima) into column 0 of the next slot:
    the exp bias itself, so no separate -m instruction."""
    q0, qn, s_t, nb = tile[3], tile[4], tile[5], len(blocks)
    slot, nxt = j % t.ring_ns, (j + 1) % t.ring_ns
    hi = nb + 1
    for g in range(nb):
        kb0, w, masked = blocks[g]
        bank = _bank(st, t, i, g)
        if not masked:
            nisa.tensor_reduce(
                dst=st.ext[0:qn, s_t, slot, 1 + g : 2 + g],
                op=nl.maximum,
                data=bank[0:qn, 0:w],
                axis=1,
                negate=True,
                keepdims=True,
            )
            continue
        u = q0 - kb0  # unmasked columns of the diagonal block
        col = 1 + g
        if u:
            nisa.tensor_reduce(
                dst=st.ext[0:qn, s_t, slot, col : col + 1],
                op=nl.maximum,
                data=bank[0:qn, 0:u],
                axis=1,
                negate=True,
                keepdims=True,
            )
            col, hi = nb + 1, nb + 2  # the triangle's max goes to the extra column
        r, tw = t.tri_slot[i], w - u
        tri = st.tri_ring[0:qn, r, 0:tw]
        nisa.tensor_copy(dst=tri, src=bank[0:qn, u:w], engine=nisa.engine.vector)
        _mask_triangle(tri, tri, q0, kb0 + u, tw, -MASK_FILL)
        nisa.tensor_reduce(
            dst=st.ext[0:qn, s_t, slot, col : col + 1], op=nl.maximum, data=tri, axis=1, negate=True, keepdims=True
        )
        st.tri[i] = (g, u)
    lo = 0 if j > 0 else 1
    nisa.tensor_reduce(
        dst=st.ext[0:qn, s_t, nxt, 0:1], op=nl.minimum, data=st.ext[0:qn, s_t, slot, lo:hi], axis=1, keepdims=True
    )


def _stage_exp(st, t, i, tile, j, blocks):
    """alpha_j = exp(m_{j-1} - m_j) and p = exp(s - m_j) in the input dtype (ScalarE; s is
    already scaled: q^T carries softmax_scale); a masked block's triangle is read from its
    masked SBUF copy."""
    qn, s_t = tile[4], tile[5]
    slot, nxt, r = j % t.ring_ns, (j + 1) % t.ring_ns, i % t.ring_p
    bias = st.ext[0:qn, s_t, nxt, 0:1]  # -m_j
    if j > 0:
        nisa.activation(
            dst=st.alpha[0:qn, s_t, slot : slot + 1],
            op=nl.exp,
            data=st.ext[0:qn, s_t, slot, 0:1],
            bias=bias,
            scale=-1.0,
        )  # exp(-(-m_{j-1}) - m_j)
    for g in range(len(blocks)):
        w, masked = blocks[g][1], blocks[g][2]
        bank, c0 = _bank(st, t, i, g), g * KEY_BLOCK
        if not masked:
            nisa.activation(dst=st.p_ring[0:qn, r, c0 : c0 + w], op=nl.exp, data=bank[0:qn, 0:w], bias=bias)
            continue
        u = st.tri[i][1]
        if u:
            nisa.activation(dst=st.p_ring[0:qn, r, c0 : c0 + u], op=nl.exp, data=bank[0:qn, 0:u], bias=bias)
        nisa.activation(
            dst=st.p_ring[0:qn, r, c0 + u : c0 + w],
            op=nl.exp,
            data=st.tri_ring[0:qn, t.tri_slot[i], 0 : w - u],
            bias=bias,
        )


def _stage_pT(st, t, i, tile, j, blocks):
    """p^T of item i: its 128-key chunks on TensorE into PSUM tiles of one bank each (the whole
    step for 2-byte p, one block for fp32), each evicted into the p^T ring by one VectorE or
    ScalarE copy (the program's dve_evict picks the engine per step)."""
    qn, r, rt = tile[4], i % t.ring_p, t.pe_slot[i]
    eng = nisa.engine.vector if t.dve_evict[i] else nisa.engine.scalar
    for b0, chunks in t.pT_banks[i]:
        pT_ps = nl.ndarray((TILE_K, t.pT_bank, qn), dtype=st.p_ring.dtype, buffer=nl.psum)
        full = 0  # every chunk but possibly the step's last has 128 keys
        for c in range(len(chunks)):
            c0, kc = chunks[c]
            nisa.nc_transpose(dst=pT_ps[0:kc, c, :], data=st.p_ring[0:qn, r, c0 : c0 + kc])
            if kc == TILE_K:
                full += 1
        if full:
            nisa.tensor_copy(dst=st.pT_ring[:, rt, b0 : b0 + full, 0:qn], src=pT_ps[:, 0:full, :], engine=eng)
        if full < len(chunks):
            kc = chunks[len(chunks) - 1][1]
            nisa.tensor_copy(dst=st.pT_ring[0:kc, rt, b0 + full, 0:qn], src=pT_ps[0:kc, full, :], engine=eng)


def _stage_pv(st, t, i, tile, j, blocks):
    """[o | l] of item i = p @ [V | 1]: one PSUM accumulation group, the first matmul
    overwriting; read by the update stage."""
    qn = tile[4]
    o_ps = nl.ndarray((qn, t.D + 1), dtype=nl.float32, buffer=nl.psum)
    first = True
    for g in range(len(blocks)):
        kb0, w = blocks[g][0], blocks[g][1]
        t0 = kb0 // TILE_K
        for c in range((w + TILE_K - 1) // TILE_K):
            kc = min(TILE_K, w - c * TILE_K)
            nisa.nc_matmul(
                dst=o_ps,
                stationary=st.pT_ring[0:kc, t.pe_slot[i], g * CHUNKS + c, 0:qn],
                moving=st.vt[0:kc, t0 + c, :],
                accumulate=not first,
            )
            first = False
    st.o_ps[i] = o_ps


def _stage_update(st, t, i, tile, j, blocks):
    """acc = alpha_j * acc + [o | l] (VectorE scalar_tensor_tensor reading PSUM); the first
    step copies [o | l] into acc (ScalarE)."""
    qn, s_t = tile[4], tile[5]
    o_ps = st.o_ps[i]
    st.o_ps[i] = None
    if j == 0:
        nisa.activation(dst=st.acc[0:qn, s_t, :], op=nl.copy, data=o_ps)
        return
    slot = j % t.ring_ns
    nisa.scalar_tensor_tensor(
        dst=st.acc[0:qn, s_t, :],
        data=st.acc[0:qn, s_t, :],
        op0=nl.multiply,
        operand0=st.alpha[0:qn, s_t, slot : slot + 1],
        op1=nl.add,
        operand1=o_ps,
    )


flash_attention = HostEntry(
    _prepare,
    attention_kernel,
    "flash_attention",
    """softmax(q k^T * scale [+ causal mask]) v for q (B, H, Sq, D), k and v (B, H, Sk, D) in
    HBM -> (B, H, Sq, D) in q's dtype: the NKI 0.7 port of ``attention.flash_attention`` (same
    plan, software pipeline, limits and numerics; see its docstring and attention_design.md).""",
)
