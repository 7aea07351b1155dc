"""``nisa.topk`` (GpSimdE): the k largest values, and their indices, of each 16-partition group.

Sources: aws-neuron-sdk 81ce03ae ``nki/api/nki/isa/__init__.py`` ``topk`` (NKI 0.6, SDK 2.32: the
constraints and the cost) and the SDK 2.33.0 API page ``nki/api/generated/nki.isa.topk.html``
(NKI 0.7: the ``sorted=`` parameter, one independent problem per group of 16 partitions, the snake
layout of the inputs *and* of the results).  docs/nki-0.7-spec.md I20 lists what each says.

The snake of group ``g`` (partitions ``16g .. 16g+15``): element ``s`` sits at partition
``16g + s % 16``, free position ``s // 16``; the first ``n`` elements take part.  Result ``j`` of a
group lands at partition ``16g + j % 16``, free position ``j // 16`` of ``val_dst`` / ``idx_dst``;
``idx_dst`` holds the result's snake index ``s`` (0 .. n-1).

Decisions (the pages we have are silent, docs/nki-0.7-spec.md "Decisions"):
* order: ``sorted=True`` puts the j-th largest at result j (nki-library's chunked top-k kernel relies on
  "rank j at snake position j" for a descending order); ``sorted=False`` gives the k values in
  ascending order, what the 0.6 page states for the instruction without the parameter;
* ties: the lower snake index ranks first;
* the slots ``j >= k`` of the last written free position (``k`` not a multiple of 16), and the free
  positions past ``ceil(k / 16)``, are left untouched: the 2.33 page says positions
  ``0 .. ceil(k/16) - 1`` are written, nki-library calls the slots past ``k`` "unwritten".
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .context import RunContext
from .errors import SimTypeError, SimValueError
from .ops import compute_result, emit, free_size, op, same_partitions, tile
from .tensor import SBUF, Tensor
from .trace import POOL

GROUP = 16  # partitions per independent top-k problem (2.33 page: "each 16-partition group")
N_MIN, N_LIMIT = 8, 65536  # 0.6 constraint "8 <= n < 65536"
K_LIMIT = 32768  # 0.6 constraint "1 <= K < 32768 and K <= n"


def _dtype_is(t: Tensor, want: np.dtype, arg: str, what: str) -> None:
    if t.dtype != want:
        raise SimTypeError(
            "E009",
            "topk",
            arg,
            f"{arg} must be {dt.name_of(want)} ({what}), got {dt.name_of(t.dtype)}",
            f"Allocate {arg} as nl.{dt.name_of(want)}",
        )


def _limit(arg: str, ok: bool, what: str, got: object, limit: object, fix: str) -> None:
    if not ok:
        raise SimValueError("E011", "topk", arg, what, fix, got=got, limit=limit)


@op
def topk(
    ctx: RunContext,
    dst: Tensor,
    idx_dst: Tensor,
    src: Tensor,
    n: int,
    sorted: bool = False,
    *,
    api: str = "nisa.topk",
    name: str | None = None,
) -> None:
    """``topk(val_dst, idx_dst, src, n, sorted=False)``: per 16-partition group, the k largest of the
    first ``n`` snake elements of ``src`` (module docstring); k is ``val_dst``'s free size."""
    aname = "topk"
    if not isinstance(dst, Tensor):
        raise SimTypeError("E010", aname, "val_dst", f"val_dst must be an SBUF tile, got {type(dst).__name__}")
    # 0.6 constraints: source and outputs in SBUF; src and val_dst BF16, idx_dst uint32
    tile(src, aname, "src", buffers=(SBUF,))
    tile(dst, aname, "val_dst", buffers=(SBUF,))
    tile(idx_dst, aname, "idx_dst", buffers=(SBUF,))
    _dtype_is(src, dt.bfloat16, "src", "the instruction reads BF16 elements")
    _dtype_is(dst, dt.bfloat16, "val_dst", "the values are written as BF16")
    _dtype_is(idx_dst, dt.uint32, "idx_dst", "the indices are written as uint32")
    same_partitions(aname, src=src, val_dst=dst, idx_dst=idx_dst)
    P = src.shape[0]
    _limit(
        "src",
        P % GROUP == 0,
        f"the partition dimension must be a multiple of {GROUP} (one top-k per 16-partition group), got {P}",
        P,
        f"a multiple of {GROUP}",
        "Give each problem a whole 16-partition group",
    )
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise SimTypeError("E010", aname, "n", f"n must be a compile-time int, got {type(n).__name__}")
    n = int(n)
    _limit(
        "n",
        N_MIN <= n < N_LIMIT,
        f"n must satisfy {N_MIN} <= n < {N_LIMIT}, got {n}",
        n,
        N_LIMIT - 1,
        "Pass n in [8, 65535]",
    )
    k = free_size(dst.shape)
    _limit(
        "idx_dst",
        free_size(idx_dst.shape) == k,
        f"idx_dst {tuple(idx_dst.shape)} must have val_dst's free size {k}",
        free_size(idx_dst.shape),
        k,
        "Allocate both outputs as (par_dim, k)",
    )
    _limit(
        "val_dst",
        1 <= k < K_LIMIT and k <= n,
        f"k (the free size of val_dst) must satisfy 1 <= k < {K_LIMIT} and k <= n = {n}, got {k}",
        k,
        min(K_LIMIT - 1, n),
        "Ask for at most n results",
    )
    F = free_size(src.shape)
    cols = -(-n // GROUP)
    _limit(
        "src",
        F >= cols,
        f"src holds {F} free elements per partition; a snake of n = {n} needs ceil(n / 16) = {cols}",
        F,
        cols,
        "Pass a wider src or a smaller n",
    )
    if not isinstance(sorted, (bool, np.bool_)):
        raise SimTypeError("E010", aname, "sorted", f"sorted must be a bool, got {type(sorted).__name__}")

    G = P // GROUP
    x = src.read_f32().reshape(P, F)[:, :cols]
    # the snake of each group: element s = x[16g + s % 16, s // 16]
    snake = x.reshape(G, GROUP, cols).transpose(0, 2, 1).reshape(G, cols * GROUP)[:, :n]
    order = np.argsort(-snake, axis=1, kind="stable")[:, :k]  # descending, ties: lower index first
    if not sorted:
        order = order[:, ::-1]  # the k largest in ascending order
    vals = np.take_along_axis(snake, order, axis=1)
    j = np.arange(k)
    rows = np.arange(G)[:, None] * GROUP + (j % GROUP)[None, :]
    cols_out = np.broadcast_to(j // GROUP, rows.shape)
    val_out = np.zeros((P, k), np.float32)
    idx_out = np.zeros((P, k), np.uint32)
    written = np.zeros((P, k), bool)
    val_out[rows, cols_out] = vals
    idx_out[rows, cols_out] = order
    written[rows, cols_out] = True
    idx_dst.write(idx_out.reshape(idx_dst.shape), written.reshape(idx_dst.shape), api=aname)
    res = compute_result(
        val_out.reshape(dst.shape),
        dst.dtype,
        op="topk",
        api=api,
        engine=POOL,
        inputs=(src,),
        mask=written.reshape(dst.shape),
        func="topk",
        axes=1,
        extra_writes=(idx_dst,),
    )
    # the event's elements per partition are the n snake elements the 0.6 cost "4*n + K" counts
    res.free_elems = n
    emit(ctx, dst, res)
