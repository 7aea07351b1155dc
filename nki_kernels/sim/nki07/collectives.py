"""``nki.collectives`` of NKI 0.7 on the interpreter (docs/nki-0.7-spec.md §4c, rules X3-X12; ``nisa.sendrecv``
between the cores of an LNC launch is p2p.py, rules X1-X2).

Sources (aws-neuron-sdk 81ce03ae): ``nki/api/nki/collectives/__init__.py`` (the API pages of every call here);
SDK 2.33.0 ``nki.collectives.ReplicaGroup`` page (a list of rank-lists; the collective runs independently within
each rank-list; each rank in one rank-list only).

**Ranks (``nki.collectives``).**  A rank is one logical NeuronCore running the whole kernel.  :func:`run_ranks`
runs a kernel as ``n`` ranks in one process, each a thread with its own run (its own inputs, memory and trace);
only one rank runs at a time, and a rank hands the turn on only where it waits in a collective, so a run is
deterministic.  The ``k``-th collective that LNC core ``p`` of a rank calls on a rank-list meets the ``k``-th one
of core ``p`` of every other rank of that rank-list: when the last of them arrives the result is computed from
the copies of the ``srcs`` each took at its call, and every rank writes its own ``dsts``.  (Under LNC=2 each
core thus runs its own exchange: two cores calling an HBM collective on the same shared tensors write the same
values twice.)  A kernel run without :func:`run_ranks` is rank 0 of a world of one rank.  A rank that is not in
any rank-list of the replica group does not take part: the collective does nothing on it (the ReplicaGroup
page: the set of ranks the collective "is executed on").

Events: every call records one DMA event per destination (op: the collective's name, engine DMA,
the bytes landing in that destination), costed by the cost model as a DMA of those bytes; the link between
cores or chips is not modelled.  ``all_gather_v`` and ``all_to_all_v`` are not implemented (E100).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.context import RunContext, current, enter
from ..core.errors import NKISyntaxError, SimRuntimeError, SimTypeError, SimValueError
from ..core.ops import opcode, record_dma, tile
from ..core.options import SimOptions, default_options
from ..core.tensor import HBM_KINDS, SBUF, Tensor
from .adapt import module_getattr, unwrap
from .isa import VirtualRegister
from .kernel import Kernel, jit, simulate
from .language import NKIObject
from .scalar import value_of

_COL = "aws-neuron-sdk 81ce03ae nki/api/nki/collectives/__init__.py"
_REDUCE_OPS = ("add", "minimum", "maximum")


# ---- replica groups ----------------------------------------------------------------------------------------------
class ReplicaGroup(NKIObject):
    """The ranks a collective runs on: a list of rank-lists; the collective runs independently within each
    rank-list (SDK 2.33.0 ReplicaGroup page); rank-lists must not overlap (the page: each rank "must participate
    in only one rank-list"; 81ce03ae: sub-groups "should not have any overlap"): E011."""

    def __init__(self, replica_groups: Sequence[Sequence[int]]):
        api = "nki.collectives.ReplicaGroup"
        if isinstance(replica_groups, (str, bytes)) or not isinstance(replica_groups, Sequence):
            raise SimTypeError(
                "E010",
                api,
                "replica_groups",
                f"expected a list of rank-lists, got {type(replica_groups).__name__}",
                "Pass e.g. ReplicaGroup([[0, 1, 2, 3]])",
            )
        groups: list[tuple[int, ...]] = []
        seen: dict[int, int] = {}
        for i, g in enumerate(replica_groups):
            if isinstance(g, (str, bytes)) or not isinstance(g, Sequence) or not g:
                raise SimTypeError(
                    "E010",
                    api,
                    "replica_groups",
                    f"rank-list {i} is {g!r}: each rank-list is a non-empty list of int ranks",
                    "Pass e.g. ReplicaGroup([[0, 1], [2, 3]])",
                )
            ranks = []
            for r in g:
                if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or int(r) < 0:
                    raise SimTypeError(
                        "E010", api, "replica_groups", f"rank {r!r} of rank-list {i} is not a non-negative int"
                    )
                r = int(r)
                if r in seen:
                    raise SimValueError(
                        "E011",
                        api,
                        "replica_groups",
                        f"rank {r} is in rank-list {seen[r]} and rank-list {i}: a rank takes part in one rank-list "
                        "only (SDK 2.33.0 ReplicaGroup page)",
                        "Give every rank to one rank-list",
                    )
                seen[r] = i
                ranks.append(r)
            groups.append(tuple(ranks))
        self.replica_groups = [list(g) for g in groups]
        self._groups = tuple(groups)

    def group_of(self, rank: int) -> tuple[int, ...] | None:
        """The rank-list holding ``rank`` (None: the rank is in none)."""
        for g in self._groups:
            if rank in g:
                return g
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplicaGroup) and other._groups == self._groups

    def __hash__(self) -> int:
        return hash(self._groups)

    def __repr__(self) -> str:
        return f"ReplicaGroup({self.replica_groups})"


# ---- the world of ranks ------------------------------------------------------------------------------------------
class _WorldAborted(BaseException):
    """Unwinds the other ranks when one of them raised."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankOptions(SimOptions):
    """The options of one rank of a :func:`run_ranks` run: the run's :class:`World` and the rank's index."""

    world: Any = None
    rank: int = 0


class _Op:
    """One collective meeting: what each rank brought, and the result for each rank."""

    def __init__(self, kind: str, members: tuple[int, ...], sig: tuple):
        self.kind, self.members, self.sig = kind, members, sig
        self.inputs: dict[int, Any] = {}
        self.outputs: dict[int, list] | None = None
        self.first_site = ("<unknown>", 0)


class World:
    """The ranks of one :func:`run_ranks` run and the collectives they meet in (module docstring)."""

    def __init__(self, n: int):
        self.n = n
        self.cv = threading.Condition()
        self.turn = 0
        self.alive = [True] * n
        self.waiting: list[_Op | None] = [None] * n
        self.ops: dict[tuple, _Op] = {}
        self.counts: dict[tuple, int] = {}
        self.error: BaseException | None = None

    def _next(self, r: int) -> int:
        """The next rank that can run (alive and not waiting), round robin after ``r``; -1: none."""
        for k in range(1, self.n + 1):
            c = (r + k) % self.n
            if self.alive[c] and self.waiting[c] is None:
                return c
        return -1

    def _stuck(self, api: str) -> SimRuntimeError:
        waits = [(r, op) for r, op in enumerate(self.waiting) if op is not None]
        parts = []
        for r, op in waits:
            missing = [m for m in op.members if m not in op.inputs]
            parts.append(f"rank {r} waits in {op.kind} for rank(s) {missing}")
        ended = [r for r in range(self.n) if not self.alive[r]]
        return SimRuntimeError(
            "E032",
            api,
            None,
            "the ranks cannot go on: " + "; ".join(parts) + (f" (rank(s) {ended} already returned)" if ended else ""),
            "Every rank of a rank-list must call the same collectives in the same order",
        )

    def start(self, r: int) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.turn == r or self.error is not None)
            if self.error is not None:
                raise _WorldAborted()

    def finish(self, r: int, error: BaseException | None) -> None:
        with self.cv:
            self.alive[r] = False
            if error is not None and self.error is None:
                self.error = error
            if self.error is None:
                nxt = self._next(r)
                if nxt < 0 and any(self.alive):
                    self.error = self._stuck("nki.collectives")
                self.turn = nxt
            self.cv.notify_all()

    def meet(self, r: int, key: tuple, kind: str, members: tuple[int, ...], sig: tuple, value: Any, api: str) -> list:
        """Bring ``value`` to the meeting ``key``; the result for rank ``r`` once every member has come."""
        ctx = current(api)
        with self.cv:
            op = self.ops.get(key)
            if op is None:
                op = self.ops[key] = _Op(kind, members, sig)
                op.first_site = ctx.site
            elif (op.kind, op.sig) != (kind, sig):
                raise SimValueError(
                    "E011",
                    api,
                    None,
                    f"rank {r} calls {kind}{_fmt(sig)} where rank(s) {sorted(op.inputs)} of rank-list "
                    f"{list(members)} called {op.kind}{_fmt(op.sig)} (their collective number {key[-1]} on this "
                    "rank-list)",
                    "Every rank of a rank-list must call the same collectives, with the same shapes, in the same order",
                )
            op.inputs[r] = value
            if len(op.inputs) == len(members):
                op.outputs = _COMPUTE[kind](op)
                del self.ops[key]
                for m in members:
                    if self.waiting[m] is op:
                        self.waiting[m] = None
            else:
                self.waiting[r] = op
                site, api_, eng = ctx.site, ctx.api, ctx.engine_given
                nxt = self._next(r)
                if nxt < 0:
                    self.error = self._stuck(api)
                    self.cv.notify_all()
                    raise self.error
                self.turn = nxt
                self.cv.notify_all()
                self.cv.wait_for(lambda: (self.turn == r and self.waiting[r] is None) or self.error is not None)
                if self.error is not None:
                    raise _WorldAborted()
                ctx.site, ctx.api, ctx.engine_given = site, api_, eng
            assert op.outputs is not None
            return op.outputs[r]


def _fmt(sig: tuple) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in sig) + ")"


def _world(ctx: RunContext) -> tuple[World | None, int]:
    o = ctx.options
    return (o.world, o.rank) if isinstance(o, RankOptions) else (None, 0)


def run_ranks(
    kernel: Callable, inputs: Sequence[dict], lnc: int | None = None, options: SimOptions | None = None
) -> list:
    """Run ``kernel`` as ``len(inputs)`` ranks (rank ``r`` gets the keyword arguments ``inputs[r]``), each on an
    LNC degree of ``lnc`` (None: as a plain call would); the outputs of each rank, in rank order.  The first error
    of any rank is raised (with a note naming the rank); the others stop."""
    if isinstance(inputs, dict) or not isinstance(inputs, Sequence) or not inputs:
        raise SimValueError(
            "E011",
            "run_ranks",
            "inputs",
            f"expected a non-empty list of per-rank keyword-argument dicts, got {type(inputs).__name__}",
            "Pass [dict(...) for rank in range(n)]",
        )
    if any(not isinstance(d, dict) for d in inputs):
        raise SimValueError("E011", "run_ranks", "inputs", "every rank's inputs must be a dict of keyword arguments")
    k = kernel if isinstance(kernel, Kernel) else jit(kernel)
    if lnc is not None:
        k = k[lnc]
    n = len(inputs)
    world = World(n)
    base = options if options is not None else default_options()
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(SimOptions)}
    results: list = [None] * n
    errors: list = [None] * n

    def rank_main(r: int) -> None:
        err = None
        try:
            world.start(r)
            results[r] = simulate(k, RankOptions(**fields, world=world, rank=r))(**inputs[r])
        except _WorldAborted:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            err = errors[r] = e
        finally:
            world.finish(r, err)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True, name=f"nki-rank-{r}") for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = world.error
    if first is not None:
        r = next((i for i, e in enumerate(errors) if e is first), None)
        if r is not None and sys.version_info >= (3, 11):  # add_note is new in 3.11 (requires-python >= 3.10)
            first.add_note(f"(in rank {r} of {n})")
        raise first
    return results


# ---- shared argument checks ------------------------------------------------------------------------------------
def _tensor_list(x: Any, api: str, arg: str) -> list[Tensor]:
    if not isinstance(x, (list, tuple)) or not x:
        raise SimTypeError(
            "E010", api, arg, f"expected a non-empty list of tensors, got {type(x).__name__}", f"Pass {arg}=[tensor]"
        )
    out = []
    for i, t in enumerate(x):
        t = unwrap(t)
        if not isinstance(t, Tensor):
            raise SimTypeError("E010", api, arg, f"{arg}[{i}] is a {type(t).__name__}, not a tensor")
        out.append(t)
    return out


def _space(ts: list[Tensor], api: str, hbm_only: bool = False, one: bool = False, n: int | None = None) -> bool:
    """True: the tensors are on HBM.  All on HBM or all in SBUF; coalesced (``n`` src/dst pairs, default half
    of ``ts``; channels are not coalescing) only on HBM (the API pages)."""
    kinds = {"hbm" if t.alloc.buffer in HBM_KINDS else t.alloc.buffer.value for t in ts}
    if kinds - {"hbm", SBUF.value}:
        raise SimTypeError(
            "E007", api, None, f"collective tensors live on HBM or in SBUF, got {sorted(kinds)} ({_COL}, {api})"
        )
    if len(kinds) > 1:
        raise SimTypeError(
            "E007",
            api,
            None,
            f"mixing HBM and SBUF tensors in one collective is not supported ({_COL}, {api})",
            "Put all srcs and dsts on HBM or all in SBUF",
        )
    on_hbm = kinds == {"hbm"}
    if hbm_only and not on_hbm:
        raise SimTypeError(
            "E007", api, None, f"{api} tensors must reside on HBM; SBUF is not supported ({_COL})", "Use HBM tensors"
        )
    n = len(ts) // 2 if n is None else n
    if one and n != 1:
        raise SimValueError("E011", api, None, f"{api} takes exactly one src and one dst tensor, got {n} ({_COL})")
    if n > 1 and not on_hbm:
        raise SimValueError(
            "E011",
            api,
            None,
            f"coalesced collectives ({n} tensors) are supported only on HBM ({_COL}, {api})",
            "Issue one collective per SBUF tensor",
        )
    return on_hbm


def _pairs(srcs: Any, dsts: Any, api: str) -> tuple[list[Tensor], list[Tensor]]:
    s, d = _tensor_list(srcs, api, "srcs"), _tensor_list(dsts, api, "dsts")
    if len(s) != len(d):
        raise SimValueError("E011", api, "dsts", f"{len(s)} srcs but {len(d)} dsts: one dst per src")
    return s, d


def _reduce_op(op: Any, api: str) -> str:
    name = opcode(op, api, "op")
    if name not in _REDUCE_OPS:
        raise NKISyntaxError(
            "E021", api, "op", f"{name} is not a collective reduction ({_COL}: nl.add, nl.minimum or nl.maximum)"
        )
    return name


def _group(rg: Any, api: str) -> ReplicaGroup:
    if not isinstance(rg, ReplicaGroup):
        raise SimTypeError(
            "E010",
            api,
            "replica_group",
            f"expected a nki.collectives.ReplicaGroup, got {type(rg).__name__}",
            "Pass replica_group=ReplicaGroup([[0, 1, ...]])",
        )
    return rg


def _members(ctx: RunContext, rg: ReplicaGroup, api: str) -> tuple[int, ...] | None:
    world, r = _world(ctx)
    n = world.n if world is not None else 1
    too_big = [x for g in rg._groups for x in g if x >= n]
    if too_big:
        raise SimValueError(
            "E011",
            api,
            "replica_group",
            f"{rg!r} names rank(s) {sorted(set(too_big))}, but this run has {n} rank(s)",
            "Run the kernel as that many ranks: nki_kernels.sim.nki07.collectives.run_ranks(kernel, [inputs of "
            "each rank], lnc=...)",
        )
    return rg.group_of(r)


def _dim(cd: Any, on_hbm: bool, api: str, sbuf_dims: tuple[int, ...]) -> int:
    if isinstance(cd, bool) or not isinstance(cd, (int, np.integer)):
        raise SimTypeError("E010", api, "collective_dim", f"expected an int, got {type(cd).__name__}")
    cd = int(cd)
    allowed = (0,) if on_hbm else sbuf_dims
    if cd not in allowed:
        raise SimValueError(
            "E011",
            api,
            "collective_dim",
            f"collective_dim={cd}: {api} supports {' or '.join(map(str, allowed))} for "
            f"{'HBM' if on_hbm else 'SBUF'} tensors ({_COL})",
            got=cd,
        )
    return cd


def _snap(ts: list[Tensor]) -> list[np.ndarray]:
    return [np.array(t.read(), copy=True) for t in ts]


def _land(ctx: RunContext, api: str, kind: str, srcs: list[Tensor], dsts: list[Tensor], values: list) -> None:
    for i, (d, v) in enumerate(zip(dsts, values, strict=True)):
        if v is None:
            continue
        d.write(np.asarray(v).reshape(d.shape), api=api)
        record_dma(ctx, api, d, srcs[min(i, len(srcs) - 1)], d.size, op=kind)


def _collective(
    api: str,
    kind: str,
    rg: ReplicaGroup,
    srcs: list[Tensor],
    dsts: list[Tensor],
    sig: tuple,
    ctx: RunContext,
) -> None:
    members = _members(ctx, rg, api)
    if members is None:
        return  # this rank is not in the replica group: the collective is not executed on it
    world, r = _world(ctx)
    shapes = tuple((tuple(s.shape), tuple(d.shape)) for s, d in zip(srcs, dsts, strict=False))
    value = (_snap(srcs), [tuple(d.shape) for d in dsts])
    full_sig = (*sig, ("shapes", shapes))
    if world is None:
        op = _Op(kind, members, full_sig)
        op.inputs[0] = value
        out = _COMPUTE[kind](op)[0]
    else:
        core = ctx.program_id[0] if ctx.program_id else 0
        gkey = (members, core)
        seq = world.counts.get((r, gkey), 0)
        world.counts[(r, gkey)] = seq + 1
        out = world.meet(r, (gkey, seq), kind, members, full_sig, value, api)
    _land(ctx, api, kind, srcs, dsts, out)


# ---- the results of each collective, from the members' inputs (rank-list order) ---------------------------------
def _fold(vals: list[np.ndarray], how: str) -> np.ndarray:
    wide = np.int64 if vals[0].dtype.kind in "iub" else np.float32  # ints exact, floats (bf16/fp8 too) in fp32
    acc = [np.asarray(v, dtype=wide) for v in vals]
    f = {"add": np.add, "minimum": np.minimum, "maximum": np.maximum}[how]
    out = acc[0]
    for v in acc[1:]:
        out = f(out, v)
    return out


def _sig(op: _Op, name: str) -> Any:
    return dict(op.sig)[name]


def _all_reduce(op: _Op) -> dict[int, list]:
    how = _sig(op, "op")
    n_t = len(op.inputs[op.members[0]][0])
    res = [_fold([op.inputs[m][0][i] for m in op.members], how) for i in range(n_t)]
    return {m: res for m in op.members}


def _all_gather(op: _Op) -> dict[int, list]:
    cd = _sig(op, "collective_dim")
    n_t = len(op.inputs[op.members[0]][0])
    res = [np.concatenate([op.inputs[m][0][i] for m in op.members], axis=cd) for i in range(n_t)]
    return {m: res for m in op.members}


def _reduce_scatter(op: _Op) -> dict[int, list]:
    how, cd = _sig(op, "op"), _sig(op, "collective_dim")
    n, n_t = len(op.members), len(op.inputs[op.members[0]][0])
    out: dict[int, list] = {m: [] for m in op.members}
    for i in range(n_t):
        total = _fold([op.inputs[m][0][i] for m in op.members], how)
        chunks = np.split(total, n, axis=cd)
        for j, m in enumerate(op.members):
            out[m].append(chunks[j])
    return out


def _all_to_all(op: _Op) -> dict[int, list]:
    cd = _sig(op, "collective_dim")
    n, n_t = len(op.members), len(op.inputs[op.members[0]][0])
    out: dict[int, list] = {m: [] for m in op.members}
    for i in range(n_t):
        split = {m: np.split(op.inputs[m][0][i], n, axis=cd) for m in op.members}
        for j, m in enumerate(op.members):
            out[m].append(np.concatenate([split[s][j] for s in op.members], axis=cd))
    return out


def _permute(op: _Op) -> dict[int, list]:
    """collective_permute: the dst of each target is the src of its source (None: not a target, unchanged)."""
    pairs = _sig(op, "source_target_pairs")
    out: dict[int, list] = {m: [None] for m in op.members}
    for s, t in pairs:
        out[t] = [op.inputs[s][0][0]]
    return out


def _ring(op: _Op) -> dict[int, list]:
    """collective_permute_implicit(_reduce): each rank receives its ring predecessor's data, per channel."""
    how = _sig(op, "op")
    n = len(op.members)
    out: dict[int, list] = {}
    for j, m in enumerate(op.members):
        pred = op.members[(j - 1) % n]
        srcs = op.inputs[pred][0]
        if how is None:
            out[m] = list(srcs)
        else:
            half = len(srcs) // 2
            out[m] = [_fold([srcs[c], srcs[half + c]], how) for c in range(half)]
    return out


_COMPUTE: dict[str, Callable[[_Op], dict[int, list]]] = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "collective_permute": _permute,
    "collective_permute_implicit": _ring,
    "collective_permute_implicit_reduce": _ring,
}


def _same_shapes(srcs: list[Tensor], dsts: list[Tensor], api: str, dst_of: Callable[[tuple], tuple]) -> None:
    for i, (s, d) in enumerate(zip(srcs, dsts, strict=True)):
        want = dst_of(tuple(s.shape))
        if tuple(d.shape) != want:
            raise SimValueError(
                "E011",
                api,
                "dsts",
                f"dsts[{i}] has shape {tuple(d.shape)}; for srcs[{i}] of shape {tuple(s.shape)} it must be {want}",
                got=tuple(d.shape),
                limit=want,
            )


# ---- the API ------------------------------------------------------------------------------------------------------
def all_reduce(
    srcs: list, dsts: list, replica_group: ReplicaGroup, op: Any, priority: int | None = None, name: str | None = None
) -> None:
    """Every rank of a rank-list gets ``op`` (add/minimum/maximum) over the rank-list's ``srcs``, element-wise
    (fp32 for floats, in rank-list order, rounded once into each dst)."""
    api = "nki.collectives.all_reduce"
    ctx = enter(api)
    s, d = _pairs(srcs, dsts, api)
    _space(s + d, api)
    how = _reduce_op(op, api)
    rg = _group(replica_group, api)
    _same_shapes(s, d, api, lambda sh: sh)
    _collective(api, "all_reduce", rg, s, d, (("op", how),), ctx)


def all_gather(
    srcs: list,
    dsts: list,
    replica_group: ReplicaGroup,
    collective_dim: int,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Every rank of a rank-list gets the rank-list's ``srcs`` concatenated along ``collective_dim`` in rank-list
    order (HBM: dim 0 only; SBUF: 0 or 1, 2-D tiles)."""
    api = "nki.collectives.all_gather"
    ctx = enter(api)
    s, d = _pairs(srcs, dsts, api)
    on_hbm = _space(s + d, api)
    cd = _dim(collective_dim, on_hbm, api, (0, 1))
    rg = _group(replica_group, api)
    members = _members(ctx, rg, api)
    n = len(members) if members is not None else 1
    _same_shapes(s, d, api, lambda sh: sh[:cd] + (sh[cd] * n,) + sh[cd + 1 :])
    if not on_hbm:
        for t in d:
            tile(t, api, "dsts", buffers=(SBUF,), engine_access=False)
    _collective(api, "all_gather", rg, s, d, (("collective_dim", cd),), ctx)


def reduce_scatter(
    srcs: list,
    dsts: list,
    replica_group: ReplicaGroup,
    collective_dim: int,
    op: Any,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """``op`` over the rank-list's ``srcs``, split into as many equal chunks along ``collective_dim`` (0 only) as
    the rank-list has ranks: the rank at position ``j`` gets chunk ``j``."""
    api = "nki.collectives.reduce_scatter"
    ctx = enter(api)
    s, d = _pairs(srcs, dsts, api)
    on_hbm = _space(s + d, api)
    cd = _dim(collective_dim, on_hbm, api, (0,))
    how = _reduce_op(op, api)
    rg = _group(replica_group, api)
    members = _members(ctx, rg, api)
    n = len(members) if members is not None else 1
    for i, t in enumerate(s):
        if t.shape[cd] % n:
            raise SimValueError(
                "E011",
                api,
                "srcs",
                f"srcs[{i}] dim {cd} is {t.shape[cd]}, not a multiple of the rank-list's {n} ranks",
            )
    _same_shapes(s, d, api, lambda sh: sh[:cd] + (sh[cd] // n,) + sh[cd + 1 :])
    _collective(api, "reduce_scatter", rg, s, d, (("op", how), ("collective_dim", cd)), ctx)


def all_to_all(
    srcs: list,
    dsts: list,
    replica_group: ReplicaGroup,
    collective_dim: int,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Each ``src`` is split into as many chunks along ``collective_dim`` (0 only; HBM only) as the rank-list has
    ranks; chunk ``j`` goes to the rank at position ``j``, which stores the chunk from the rank at position ``i``
    as chunk ``i`` of its ``dst``."""
    api = "nki.collectives.all_to_all"
    ctx = enter(api)
    s, d = _pairs(srcs, dsts, api)
    _space(s + d, api, hbm_only=True)
    cd = _dim(collective_dim, True, api, (0,))
    rg = _group(replica_group, api)
    members = _members(ctx, rg, api)
    n = len(members) if members is not None else 1
    for i, t in enumerate(s):
        if t.shape[cd] % n:
            raise SimValueError(
                "E011", api, "srcs", f"srcs[{i}] dim {cd} is {t.shape[cd]}, not a multiple of the rank-list's {n} ranks"
            )
    _same_shapes(s, d, api, lambda sh: sh)
    _collective(api, "all_to_all", rg, s, d, (("collective_dim", cd),), ctx)


def collective_permute(
    srcs: list,
    dsts: list,
    source_target_pairs: list,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """For each ``(source, target)`` pair the target's ``dst`` receives the source's ``src`` (HBM only, one
    tensor each); the ranks named in the pairs take part; a rank that is no target keeps its ``dst``."""
    api = "nki.collectives.collective_permute"
    ctx = enter(api)
    s, d = _pairs(srcs, dsts, api)
    _space(s + d, api, hbm_only=True, one=True)
    try:
        pairs = tuple((int(a), int(b)) for a, b in source_target_pairs)
    except (TypeError, ValueError):
        raise SimTypeError(
            "E010", api, "source_target_pairs", "expected a list of (source, target) int pairs"
        ) from None
    targets = [t for _, t in pairs]
    if len(set(targets)) != len(targets):
        raise SimValueError("E011", api, "source_target_pairs", f"{list(pairs)}: a rank receives from one source only")
    ranks = sorted({x for p in pairs for x in p})
    _same_shapes(s, d, api, lambda sh: sh)
    _collective(api, "collective_permute", ReplicaGroup([ranks]), s, d, (("source_target_pairs", pairs),), ctx)


def _channels(x: Any, api: str, arg: str) -> list[Tensor]:
    if not isinstance(x, (list, tuple)) or not x:
        raise SimTypeError("E010", api, arg, f"expected a list (one per channel) of one-tensor lists, got {x!r}")
    out = []
    for c, inner in enumerate(x):
        ts = _tensor_list(inner, api, f"{arg}[{c}]")
        if len(ts) != 1:
            raise SimValueError(
                "E011", api, arg, f"{arg}[{c}] holds {len(ts)} tensors: each channel takes exactly one ({_COL})"
            )
        out.append(ts[0])
    return out


def _channel_ids(ids: Any, n: int, api: str) -> None:
    ids = list(ids)
    if ids != list(range(len(ids))) or len(ids) != n:
        raise SimValueError(
            "E011",
            api,
            "channel_ids",
            f"channel_ids={ids} for {n} channel(s): they must be consecutive from 0, one per channel ({_COL})",
        )
    if n > 4:
        raise SimValueError("E011", api, "channel_ids", f"{n} channels: at most 4 ({_COL})", got=n, limit=4)


def collective_permute_implicit(
    srcs_by_channel: list,
    dsts_by_channel: list,
    replica_group: ReplicaGroup,
    channel_ids: list | None = None,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Ring: each rank sends its channel ``src`` to its successor in its rank-list and receives its predecessor's
    into the channel ``dst``."""
    api = "nki.collectives.collective_permute_implicit"
    ctx = enter(api)
    s, d = _channels(srcs_by_channel, api, "srcs_by_channel"), _channels(dsts_by_channel, api, "dsts_by_channel")
    if len(s) != len(d):
        raise SimValueError("E011", api, "dsts_by_channel", f"{len(s)} source channels but {len(d)} destination ones")
    _channel_ids([0] if channel_ids is None else channel_ids, len(s), api)
    _space(s + d, api, n=1)
    rg = _group(replica_group, api)
    _same_shapes(s, d, api, lambda sh: sh)
    _collective(api, "collective_permute_implicit", rg, s, d, (("op", None),), ctx)


def collective_permute_implicit_reduce(
    srcs0_by_channel: list,
    srcs1_by_channel: list,
    dsts_by_channel: list,
    replica_group: ReplicaGroup,
    op: Any,
    channel_ids: list | None = None,
    priority: int | None = None,
    name: str | None = None,
) -> None:
    """Ring: each rank sends ``op(srcs0[c], srcs1[c])`` to its successor and receives its predecessor's into
    ``dsts[c]``."""
    api = "nki.collectives.collective_permute_implicit_reduce"
    ctx = enter(api)
    s0 = _channels(srcs0_by_channel, api, "srcs0_by_channel")
    s1 = _channels(srcs1_by_channel, api, "srcs1_by_channel")
    d = _channels(dsts_by_channel, api, "dsts_by_channel")
    if not len(s0) == len(s1) == len(d):
        raise SimValueError("E011", api, "dsts_by_channel", "srcs0, srcs1 and dsts need one tensor per channel each")
    _channel_ids([0] if channel_ids is None else channel_ids, len(d), api)
    _space(s0 + s1 + d, api, n=1)
    how = _reduce_op(op, api)
    rg = _group(replica_group, api)
    _same_shapes(s0, d, api, lambda sh: sh)
    _same_shapes(s1, d, api, lambda sh: sh)
    _collective(api, "collective_permute_implicit_reduce", rg, s0 + s1, d, (("op", how),), ctx)


def collective_permute_implicit_current_processing_rank_id(
    iteration_id: Any, replica_group: ReplicaGroup, channel_id: int = 0, name: str | None = None
) -> Any:
    """The rank whose data a ring step holds: the rank itself at iteration 0, then ``iteration_id`` positions
    back along its rank-list (each step receives from the predecessor).  A register."""
    api = "nki.collectives.collective_permute_implicit_current_processing_rank_id"
    ctx = enter(api, instruction=False)
    rg = _group(replica_group, api)
    members = _members(ctx, rg, api)
    _, r = _world(ctx)
    if members is None:
        raise SimValueError("E011", api, "replica_group", f"rank {r} is not in {rg!r}: it has no ring")
    k = value_of(iteration_id, api)
    j = members.index(r)
    return VirtualRegister(members[(j - k) % len(members)])


def rank_id(name: str | None = None) -> Any:
    """The rank of the running kernel (0 in a run of one rank), in a register."""
    ctx = enter("nki.collectives.rank_id", instruction=False)
    return VirtualRegister(_world(ctx)[1])


__getattr__ = module_getattr("nki.collectives")

__all__ = [
    "ReplicaGroup",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_current_processing_rank_id",
    "collective_permute_implicit_reduce",
    "rank_id",
    "reduce_scatter",
    "run_ranks",
]
