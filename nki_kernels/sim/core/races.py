"""Iteration races (E029): two iterations of one ``affine_range`` entry, or two SPMD instances, writing
the same elements.

Rule: ERR ``err_unexpected_output_dependencies`` (aws-neuron-sdk@49ee15c5 ``general/nki/api/nki.errors.rst``):
the iterations of an ``affine_range`` loop and the instances of an SPMD grid may run in parallel, so each must
write different memory -- ``a[...] = a + b`` / ``nl.add`` read-modify-writes of one tile included
(aws-neuron-sdk#1052, #1055: "Unexpected output dependencies, missing indices in the dst access").  Exempt:

* matmul accumulation into PSUM (``psum += nc_matmul``, the ``affine_range`` docstring's example 2,
  ``general/nki/api/nki/language/__init__.py``);
* other ``+=`` accumulations (``sbuf += t``) are associative reductions, which the same docstring does not count
  as loop-carried dependencies and which AWS's fused-mamba tutorial (``general/nki/examples/fused_mamba``,
  ``scanC_accum[...] += scanC`` in an ``affine_range``) relies on -- but the compiler has failed on them
  (aws-neuron-sdk#1056, TEN404) and AWS advises ``+=`` only for matmul (nki-samples#47): a ``SimWarning`` by
  default, E029 under ``SimOptions(strict=True)`` (a decision: README divergences).

``sequential_range`` / ``static_range`` loops and kernels under ``skip_middle_end_transformations`` are ordered,
hence exempt (the runner creates no log for them).

The op core calls :meth:`RaceLog.note` once per instruction that writes an existing tensor (``ops.record`` /
``ops.record_dma``); the loop calls :meth:`RaceLog.close` when an ``affine_range`` entry ends and the runner
calls :meth:`RaceLog.finish` at the end of the run.  A write is kept as a box (an index range per axis of the
allocation's storage) plus its exact geometry; boxes of one allocation are swept along their most selective
axis (sorting, O(n log n) plus the overlapping pairs), and only overlapping boxes are compared element by
element.  No tensor is referenced (liveness is reference counted), only its allocation id and geometry.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .errors import SimValueError
from .policy import enforce
from .trace import LoopKind

if TYPE_CHECKING:
    from .context import RunContext
    from .tensor import Tensor

_AFFINE = LoopKind.AFFINE

# kinds of write (Write.exempt)
PLAIN, REDUCTION, PSUM_MATMUL = 0, 1, 2

# one axis of a write's geometry: (byte stride, extent) for a slice, (byte stride, index array or int)
# for an index-array view
_Axis = tuple[int, object]


class Write(NamedTuple):
    """One instruction's write into an allocation, as the race check keeps it."""

    alloc_id: int
    name: str
    box: tuple[tuple[int, int], ...]  # inclusive index range per storage axis (a bound of the elements)
    off: int  # byte offset of the view's first element in the allocation
    axes: tuple[_Axis, ...]  # exact geometry (see _Axis)
    basic: bool  # axes are (stride, extent) of a basic view
    exempt: int  # PLAIN, REDUCTION (`+=`) or PSUM_MATMUL (`psum += nc_matmul`)
    who: object  # the iteration (int) or SPMD instance (tuple)
    seq: int  # program order of the note
    file: str
    line: int


_new = tuple.__new__


def _storage(arr: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """(axis order by decreasing stride, strides, sizes) of an allocation's storage array."""
    strides = [int(s) for s in arr.strides]
    sizes = [int(n) for n in arr.shape]
    order = sorted(range(arr.ndim), key=lambda j: -strides[j])
    return order, strides, sizes


def _box(arr: np.ndarray, off: int, spans: list[tuple[int, int, int]]) -> tuple[tuple[int, int], ...]:
    """The storage-index box of the elements ``off + sum(i_k * stride_k)`` for ``i_k`` in ``[lo_k, hi_k]``
    (``spans`` = (stride, lo, hi) per view axis); the whole allocation when the view does not decompose."""
    order, strides, sizes = _storage(arr)
    full = tuple((0, n - 1) for n in sizes)
    x = off + sum(st * lo for st, lo, _ in spans)
    if x < 0 or any(st < 0 for st, _, _ in spans):
        return full
    lo = [0] * len(sizes)
    for j in order:
        if strides[j] <= 0:
            return full
        lo[j], x = divmod(x, strides[j])
    if x:
        return full
    hi = list(lo)
    for st, a, b in spans:
        if b <= a or st == 0:
            continue
        for j in order:  # the coarsest storage axis whose stride divides the step
            if strides[j] <= st and st % strides[j] == 0:
                hi[j] += (b - a) * (st // strides[j])
                break
        else:
            return full
    if any(h >= n for h, n in zip(hi, sizes, strict=False)):
        return full  # the view wraps across a storage axis (a reshape)
    return tuple(zip(lo, hi, strict=False))


_NONE = (None,)  # a cached "not checked" geometry


def _geometry(t: object) -> tuple | None:
    """:func:`_compute_geometry`, cached on the view (``Tensor._race``)."""
    g = t._race  # type: ignore[attr-defined]
    if g is None:
        g = _compute_geometry(t)
        t._race = _NONE if g is None else g  # type: ignore[attr-defined]
        return g
    return None if g is _NONE else g


def _compute_geometry(t: object) -> tuple[tuple[tuple[int, int], ...], int, tuple[_Axis, ...], bool] | None:
    """(box, byte offset, axes, basic) of a tensor view; None for accesses through runtime index tiles."""
    if getattr(t, "index_tiles", None):
        return None  # addresses read from tiles at run time: not checked (scatter semantics)
    al = t.alloc  # type: ignore[attr-defined]
    base = al.array
    off = int(t.off)  # type: ignore[attr-defined]
    a = t.arr  # type: ignore[attr-defined]
    if a is not None:
        axes: tuple[_Axis, ...] = tuple((int(st), int(n)) for st, n in zip(a.strides, a.shape, strict=False))
        if any(n == 0 for _, n in axes):
            return None
        spans = [(st, 0, int(n) - 1) for st, n in axes]  # type: ignore[call-overload]
        return _box(base, off, spans), off, axes, True
    src = t.src  # type: ignore[attr-defined]
    spans = []
    axes_l: list[_Axis] = []
    for k, n, st in zip(t.key, src.shape, src.strides, strict=False):  # type: ignore[attr-defined]
        if isinstance(k, np.ndarray):
            if not k.size:
                return None
            lo, hi = max(int(k.min()), 0), min(int(k.max()), int(n) - 1)
            axes_l.append((int(st), k))
        else:
            lo = hi = int(k)
            axes_l.append((int(st), int(k)))
        spans.append((int(st), lo, hi))
    return _box(base, off, spans), off, tuple(axes_l), False


def _offsets(off: int, axes: tuple[_Axis, ...], basic: bool) -> np.ndarray:
    """The byte offset of each element of a view, in the view's element order and shape."""
    acc: np.ndarray = np.zeros((), dtype=np.int64)
    if basic:
        for st, n in axes:
            acc = np.add.outer(acc, np.arange(int(n), dtype=np.int64) * st)  # type: ignore[call-overload]
    else:
        for st, x in axes:
            acc = acc + np.asarray(x, dtype=np.int64) * st
    return acc + off


def _elements(w: Write) -> np.ndarray:
    """The byte offsets of every element ``w`` writes (sorted, unique)."""
    return np.unique(_offsets(w.off, w.axes, w.basic).ravel())


def _masked(arr: np.ndarray, g: tuple, mask: np.ndarray) -> tuple | None:
    """The geometry of the elements of the view with geometry ``g`` that ``mask`` lets an instruction write: the
    exact byte offsets (one pseudo-axis of stride 1) and their storage box; None when none is written; ``g``
    itself when the mask does not fit the view (conservative: its whole index range)."""
    _, off, axes, basic = g
    offs = _offsets(off, axes, basic)
    m = np.asarray(mask, dtype=bool)
    if m.size == offs.size:
        m = m.reshape(offs.shape)
    else:
        try:
            m = np.broadcast_to(m, offs.shape)
        except ValueError:
            return g
    sel = np.unique(offs[m])
    if not sel.size:
        return None
    order, strides, sizes = _storage(arr)
    lo, hi = [0] * len(sizes), [n - 1 for n in sizes]
    rest = sel
    for j in order:
        if strides[j] <= 0:
            return (tuple(zip(lo, hi, strict=False)), 0, ((1, sel),), False)
        idx, rest = np.divmod(rest, strides[j])
        lo[j], hi[j] = int(idx.min()), int(idx.max())
    return (tuple(zip(lo, hi, strict=False)), 0, ((1, sel),), False)


def _overlap(a: Write, b: Write) -> bool:
    for (alo, ahi), (blo, bhi) in zip(a.box, b.box, strict=False):
        if ahi < blo or bhi < alo:
            return False
    return True


class RaceLog:
    """The writes of a run inside ``affine_range`` entries (and, with an SPMD grid, into HBM), checked when
    each entry ends and at the end of the run.  ``strict``: reductions across iterations are errors;
    ``warned``: the run's set of warnings already given."""

    __slots__ = ("entries", "spmd", "seq", "loops", "strict", "warned", "_loops", "_affine", "_run")

    def __init__(self, spmd: bool, strict: bool = False, warned: set | None = None) -> None:
        # loop id -> the entry's writes, by allocation id (in order of each allocation's first write)
        self.entries: dict[int, dict[int, list[Write]]] = {}
        self.loops: dict[int, tuple[str, int, str]] = {}  # loop id -> (file, line, kind) for messages
        self.spmd: list[Write] | None = [] if spmd else None
        self.seq = 0
        self.strict = strict
        self.warned: set = warned if warned is not None else set()
        self._loops: tuple | None = None  # the loop tuple of the last note and its affine frames
        self._affine: list | tuple = ()
        # the last tensor noted when its write was basic: (geometry, allocation id, kind, affine frames whose
        # entries' last write of that allocation it is)
        self._run: tuple | None = None

    def note(
        self, ctx: RunContext, dst: Tensor, extra: tuple, where: tuple | None, kind: int, mask: object = None
    ) -> None:
        """An instruction writes ``dst`` (and the tensors in ``extra``); ``where``: (file, line, program_id,
        loops) when it ran (None: now); ``kind``: PLAIN, REDUCTION or PSUM_MATMUL; ``mask``: the instruction's
        boolean mask over ``dst`` (None/True: every element), so that only the elements it writes are compared."""
        loops = ctx.loops if where is None else where[3]
        # the affine frames of the enclosing loops, derived once per loop tuple: every instruction of an iteration
        # sees the same tuple (loops.loop builds one per iteration), and keeping it referenced here makes identity
        # imply equal contents (tuples of immutable LoopFrames)
        if loops is not self._loops:
            self._loops = loops
            self._affine = [fr for fr in loops if fr.kind is _AFFINE] if loops else ()
        affine = self._affine
        spmd = self.spmd is not None and dst.alloc.buffer.is_hbm
        if not affine and not spmd:
            return
        if where is None:
            site = ctx.site
            where = (site[0], site[1], ctx.program_id, loops)
        file, line = where[0], where[1]
        entries = self.entries
        for t in (dst, *extra) if extra else (dst,):
            if t is None:
                continue
            g = t._race  # _geometry(t), inlined: the view's cached geometry
            if g is None:
                g = _geometry(t)
                if g is None:
                    continue
            elif g is _NONE:
                continue
            if t is dst and mask is not None and mask is not True and mask.__class__ is np.ndarray and not mask.all():
                g = _masked(t.alloc.array, g, mask)
                if g is None:
                    continue  # the mask writes nothing
            box, off, axes, basic = g
            al = t.alloc
            aid = al.id
            self.seq += 1
            seq = self.seq
            k = kind if t is dst else PLAIN
            name = None
            frames = affine
            run = self._run
            if run is not None and run[0] is g and run[1] == aid and run[2] == k:
                # the previous tensor noted was this same basic write: the entries of the frames it shares with
                # this note (same LoopFrame objects: same entry and iteration) end with it for this allocation,
                # so the loop below would keep nothing there -- start after them
                shared = run[3]
                j, m = 0, min(len(shared), len(affine))
                while j < m and affine[j] is shared[j]:
                    j += 1
                if j:
                    frames = affine[j:]
            self._run = (g, aid, k, affine) if basic else None
            for fr in frames:
                by_alloc = entries.get(fr.loop_id)
                if by_alloc is None:
                    by_alloc = entries[fr.loop_id] = {}
                    self.loops[fr.loop_id] = (fr.file, fr.line, "nl.affine_range")
                who = fr.iteration
                lst = by_alloc.get(aid)
                if lst is None:
                    lst = by_alloc[aid] = []
                elif basic:
                    # the previous write of this allocation in this entry is the same basic write (a tile
                    # rewritten, e.g. `psum += nc_matmul` in inner loops): _check keeps only the first write of
                    # each (box, who, exempt, off, axes), so not keeping this one changes nothing.  Box and axes
                    # compared by identity: the same cached geometry of the same view (kept alive by `last`).
                    last = lst[-1]
                    if (
                        last.box is box
                        and last.axes is axes
                        and last.who == who
                        and last.exempt == k
                        and last.off == off
                    ):
                        continue
                if name is None:
                    name = al.name
                # tuple.__new__ directly: what Write(...) does, without its Python-level __new__
                lst.append(_new(Write, (aid, name, box, off, axes, basic, k, who, seq, file, line)))
            if spmd and al.buffer.is_hbm and self.spmd is not None:
                self.spmd.append(
                    Write(al.id, al.name, box, off, axes, basic, k, where[2], self.seq, where[0], where[1])
                )

    def close(self, loop_id: int) -> None:
        """An ``affine_range`` entry ended: E029 if two of its iterations wrote the same elements."""
        by_alloc = self.entries.pop(loop_id, None)
        where = self.loops.pop(loop_id, None)
        run = self._run
        if run is not None:
            # the entry is gone: the last write's shared frames stop before it (a later write carrying its frame,
            # noted late, starts a new entry for it)
            # (searched from the innermost frame: entries usually end innermost first; a loop id is in one frame)
            shared = run[3]
            j = len(shared) - 1
            while j >= 0 and shared[j].loop_id != loop_id:
                j -= 1
            if j >= 0:
                self._run = (run[0], run[1], run[2], shared[:j]) if j else None
        if by_alloc and where is not None:
            self._check(by_alloc, where, "iterations")

    def finish(self) -> None:
        """The end of the run: entries left open (a loop left by ``break`` or an exception) and the SPMD
        instances' HBM writes."""
        for loop_id in list(self.entries):
            self.close(loop_id)
        if self.spmd:
            writes, self.spmd = self.spmd, []
            by_alloc: dict[int, list[Write]] = {}
            for w in writes:
                by_alloc.setdefault(w.alloc_id, []).append(w)
            self._check(by_alloc, ("", 0, "SPMD grid"), "instances")

    def _check(self, by_alloc: dict[int, list[Write]], where: tuple[str, int, str], what: str) -> None:
        """E029 / the reduction warning for the writes of one entry (or of the SPMD instances), by allocation."""
        soft: tuple[Write, Write] | None = None
        for writes_of_alloc in by_alloc.values():
            if len(writes_of_alloc) < 2 or all(w.exempt == PSUM_MATMUL for w in writes_of_alloc):
                continue
            # one entry per distinct basic write of an iteration (a tile rewritten many times per iteration)
            seen: set[tuple] = set()
            lst: list[Write] = []
            for w in writes_of_alloc:
                if w.basic:
                    key = (w.box, w.who, w.exempt, w.off, w.axes)
                    if key in seen:
                        continue
                    seen.add(key)
                lst.append(w)
            if len({w.who for w in lst}) < 2:
                continue
            hard, red = _sweep(lst)
            if hard is not None:
                if what == "instances":
                    # no documented error class covers SPMD instances (err_unexpected_output_dependencies names
                    # affine_range iterations): the lenient rule spmd.output_overlap
                    self._lenient("spmd.output_overlap", hard, where, what, reduction=False)
                else:
                    _raise(hard, where, what, reduction=False)
            if red is not None and soft is None:
                soft = red
        if soft is not None:
            self._lenient("err_unexpected_output_dependencies.rmw", soft, where, what, reduction=True)

    def _lenient(self, rule: str, pair: tuple[Write, Write], where: tuple[str, int, str], what: str, reduction: bool):
        second = pair[1]
        enforce(
            rule,
            self.strict,
            self.warned,
            _message(pair, where, what, reduction),
            _fix(what),
            op="affine_range" if what == "iterations" else "spmd",
            arg=second.name,
            where=(second.file, second.line),
        )


def _sweep(lst: list[Write]) -> tuple[tuple[Write, Write] | None, tuple[Write, Write] | None]:
    """(the first pair of writes of different iterations sharing an element that is a race, the first such pair
    of two `+=` reductions); PSUM matmul accumulations overlap freely."""
    ndim = len(lst[0].box)
    if not ndim:
        return None, None
    # sweep along the axis whose ranges start at the most distinct places (the most selective one)
    axis = max(range(ndim), key=lambda d: len({w.box[d][0] for w in lst}))
    lst.sort(key=lambda w: w.box[axis][0])
    active: list[Write] = []
    exact: dict[int, np.ndarray] = {}
    reduction: tuple[Write, Write] | None = None
    for w in lst:
        lo = w.box[axis][0]
        active = [a for a in active if a.box[axis][1] >= lo]
        for a in active:
            if a.who == w.who or (a.exempt == PSUM_MATMUL and w.exempt == PSUM_MATMUL) or not _overlap(a, w):
                continue
            both_reduce = a.exempt != PLAIN and w.exempt != PLAIN
            if both_reduce and reduction is not None:
                continue
            ea = exact.get(a.seq)
            if ea is None:
                ea = exact[a.seq] = _elements(a)
            ew = exact.get(w.seq)
            if ew is None:
                ew = exact[w.seq] = _elements(w)
            if np.intersect1d(ea, ew, assume_unique=True).size:
                pair = (a, w) if a.seq < w.seq else (w, a)
                if not both_reduce:
                    return pair, reduction
                reduction = pair
        active.append(w)
    return None, reduction


def _message(pair: tuple[Write, Write], where: tuple[str, int, str], what: str, reduction: bool) -> str:
    first, second = pair
    file, line, kind = where
    if what == "iterations":
        who = f"iterations {first.who} and {second.who} of the {kind} loop at {os.path.basename(file)}:{line}"
    else:
        who = f"SPMD instances {first.who} and {second.who}"
    head = (
        "Unexpected output dependencies"
        if not reduction
        else "A `+=` reduction (a read-modify-write) across parallel iterations"
    )
    text = (
        f"{head}: {who} both write elements of `{second.name}` (first at {os.path.basename(first.file)}:"
        f"{first.line}); they may run in parallel (ERR err_unexpected_output_dependencies)"
    )
    if reduction:
        text += (
            "; only `psum += nisa.nc_matmul(...)` is a documented accumulation, other `+=` have failed to "
            "compile (aws-neuron-sdk#1056)"
        )
    return text


def _fix(what: str) -> str:
    if what == "iterations":
        return (
            "Index the destination by the loop variable so that each iteration writes its own elements, or "
            "use nl.sequential_range when the iterations must write the same memory (only `psum += "
            "nisa.nc_matmul(...)` accumulation may overlap in an affine_range)"
        )
    return "Index the HBM output by nl.program_id(...) so that each instance writes its own elements"


def _raise(pair: tuple[Write, Write], where: tuple[str, int, str], what: str, reduction: bool) -> None:
    second = pair[1]
    raise SimValueError(
        "E029",
        "affine_range" if what == "iterations" else "spmd",
        second.name,
        _message(pair, where, what, reduction),
        _fix(what),
        where=(second.file, second.line),
    )
