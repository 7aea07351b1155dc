"""The steady state of a loop program in the scheduler: the cost model reads the program.

A loop that ran as a loop program (``Trace.loop_runs``, sim/core/program.py) is ``trips`` copies of one
iteration's instructions, the same in every iteration but for their addresses.  The list scheduler
(schedule.Scheduler.run, and the one-pass Scheduler.run_in_order) is a deterministic machine: when its whole
state at the end of iteration j + q is its state at the end of iteration j moved by q iterations (every event
index by q * per_iteration, every DMA queue position by the DMAs of q iterations, every time by one delta), and
what it reads of the instructions ahead repeats with the same shift, each later cycle of q iterations repeats
the last one moved by that delta.  The scheduler then writes the start, end and DMA records of as many cycles as
the input repeats for (:meth:`Segment.repeats_until`), moves its state ahead by them, and simulates on, one
event at a time, across the instruction that breaks the repeat; after it, it looks for a repeating state again.

What "the whole state" is, and why each piece compares as it does, is in Scheduler.run's ``snapshot`` /
``advance`` and Scheduler.run_in_order's ``check``.  The proof is exact up to floating-point rounding: times are
compared to within ``TOLERANCE`` (a billionth of the time reached plus a picosecond); a state that does not
repeat to that precision, a loop that waits on an instruction from before it or is waited on by one after it,
and a cycle with a TensorE instruction (its throttle windows are absolute times) are scheduled one event at a
time as before.  Loops of fewer than ``MIN_TRIPS`` iterations are not worth the check.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

MIN_TRIPS = 64  # iterations from which a loop is checked for a steady state
FIRST_TRY = 16  # the iteration of the first check (a pipeline fills in a few iterations)
MAX_CYCLE = 256  # iterations a repeating state may take to come back (16 DMA slots' labels rotate; placements)
TOLERANCE = 1e-9  # relative to the time reached; plus 1e-3 ns


# what the cost of an event depends on and the scheduler reads of it: op, api, engine, partitions, elements, shapes,
# dtypes, bytes, flops, payload (not the regions, whose addresses move; nor the loop frame, whose index moves)
_EVENT_FIELDS = itemgetter(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14)


class Segment:
    """One loop run as the scheduler reads it: events ``first``..``end - 1``, ``per`` per iteration, ``ref`` the
    offset in an iteration of the instruction whose end is the cut; ``reach[k]`` the furthest dependent of the
    events up to ``first + k``; ``dmax`` the furthest dependency back; ``eng`` the engines, numbered
    (:func:`_codes`).  :meth:`repeats_until` says up to where
    the events read as the ones a cycle before them (fields, dependencies as distances, elision, engine)."""

    def __init__(self, a: int, b: int, per: int, ref: int, lens: Any, rel: Any, el: Any, eng: Any):
        self.first, self.end, self.per, self.ref = a, b, per, ref
        self.line = 0  # the loop's line (for the notes)
        self.lens, self.rel, self.el, self.eng = lens, rel, el, eng
        self.fields: list = []  # the events' cost fields (segments(): once the cheaper checks pass)
        self.off = np.concatenate(([0], np.cumsum(lens)))
        self.dmax = int(rel.max()) if rel.size else 0
        self.reach: Any = None
        self.period: int | None = None  # iterations after which the input repeats (input_period)
        self._from: dict[int, Any] = {}

    def lookahead(self, at: int, cycle: int, window: int) -> int:
        """Events past its state the scheduler may read within the cycle of ``cycle`` events from ``at``: an
        engine looks at its next ``window`` instructions not started (the DMA queue likewise), which an engine
        with n instructions a cycle finds within ceil(window / n) + 1 cycles; and the dependencies' reach."""
        k = at - self.first
        _, counts = np.unique(self.eng[k : k + cycle], return_counts=True)
        return (-(-(window + 1) // int(counts.min())) + 1) * cycle + self.dmax

    def input_period(self, trips: int) -> int | None:
        """The fewest iterations q (at most MAX_CYCLE) after which the loop's input mostly repeats: at most one
        instruction in 64 reads otherwise than the one q iterations before it (the balancing of engines by sums
        of floats breaks a repeat where the sums cross a power of two, ever more rarely); None if no q does.
        Windows of a few periods at 8 places along the loop rule most candidates out cheaply."""
        per, n = self.per, self.end - self.first
        for q in range(1, MAX_CYCLE + 1):
            sh = q * per
            if sh >= n // 4:
                break
            ok = False
            span = 4 * sh + FIRST_TRY * per  # windows of a few periods at 8 places along the loop
            for k0 in range(0, max(1, n - span), max(1, (n - span) // 8)):
                k1 = min(k0 + span, n)
                if k0 + sh < k1 and not any(
                    (arr[k0 + sh : k1] != arr[k0 : k1 - sh]).any() for arr in (self.eng, self.el, self.lens)
                ):
                    ok = True
                    break
            if ok and self._bad(sh).size * 64 <= n:
                return q
        return None

    def _bad(self, shift: int) -> Any:
        """Positions (from ``first``) where the engine, elision or number of dependencies differ from those
        ``shift`` before (sorted; cached)."""
        hit = self._from.get(shift)
        if hit is None:
            parts = [np.flatnonzero(arr[shift:] != arr[:-shift]) + shift for arr in (self.eng, self.el, self.lens)]
            hit = self._from[shift] = np.unique(np.concatenate(parts))
        return hit

    def repeats_until(self, shift: int, start: int) -> int:
        """The first event at or after ``start`` that does not read as the one ``shift`` before it (its fields,
        dependencies as distances, elision, engine), or the loop's end: from ``start`` up to there the input
        repeats with that shift."""
        a, n = self.first, self.end - self.first
        s = start - a
        if s - shift < 0:
            return start
        bad = self._bad(shift)
        i = int(np.searchsorted(bad, s))
        e = int(bad[i]) if i < bad.size else n  # up to e the numbers of dependencies repeat: compare distances
        if s < e:
            off = self.off
            x, y = self.rel[off[s] : off[e]], self.rel[off[s - shift] : off[e - shift]]
            d = np.flatnonzero(x != y)
            if d.size:
                e = int(np.searchsorted(off, off[s] + int(d[0]), side="right")) - 1
        f = self.fields  # (the program's events share their field objects: the comparison is by identity)
        lo = s
        while lo < e:
            hi = min(e, lo + 4096)
            if f[lo:hi] != f[lo - shift : hi - shift]:
                e = next(k for k in range(lo, hi) if f[k] != f[k - shift])
                break
            lo = hi
        return a + e


def _dependency_part(a: int, b: int, deps: list, dependents: list) -> tuple | None:
    """(numbers of dependencies, their distances, the furthest dependent so far) of events a..b-1, or None when
    the loop is not closed: an instruction of it waits for one before it, or one after it for one of it (their
    ready times would not move with the iterations)."""
    ds = deps[a:b]
    lens = np.fromiter(map(len, ds), np.int64, b - a)
    flat = np.fromiter(chain.from_iterable(ds), np.int64, int(lens.sum()))
    last = np.array([d[-1] if d else -1 for d in dependents[a:b]], np.int64)
    if (flat.size and int(flat.min()) < a) or (last.size and int(last.max()) >= b):
        return None
    rel = np.repeat(np.arange(a, b, dtype=np.int64), lens) - flat
    return lens, rel, np.maximum.accumulate(last).tolist()


def segments(
    runs: Any, events: Any, deps: list, dependents: list, elided: dict, engine_of: list, memo: dict
) -> tuple[list, str]:
    """The loop runs whose input to the scheduler repeats, as :class:`Segment` s, and why the others do not;
    ``memo``: the trace's (TraceFacts.memo: what depends only on the dependencies is shared by the schedules)."""
    out = []
    why = []
    n = len(events)
    el_at = np.fromiter(elided.keys(), np.int64, len(elided))
    el_to = np.fromiter(elided.values(), np.int64, len(elided))
    codes: dict = {}  # engine name -> a small int (compared as arrays)
    for r in runs or ():
        a, per, trips = int(r.first), int(r.per_iteration), int(r.trips)
        b = a + per * trips
        if trips < MIN_TRIPS or per < 1 or b > n:
            continue
        key = ("steady", id(deps), a, b)
        hit = memo.get(key)
        if hit is None or hit[0] is not deps:
            hit = memo[key] = (deps, _dependency_part(a, b, deps, dependents))
        if hit[1] is None:
            why.append(f"line {r.line}: the loop waits for, or is waited for by, instructions outside it")
            continue
        lens, rel, reach = hit[1]
        el = np.full(b - a, -2, np.int64)  # -2 not elided, -1 a folded fill, else the distance to what it repeats
        inside = (el_at >= a) & (el_at < b)
        at, to = el_at[inside], el_to[inside]
        el[at - a] = np.where(to >= 0, at - to, -1)
        ref = next((j for j in range(per) if el[j] == -2), None)
        if ref is None:
            continue
        g = Segment(a, b, per, ref, lens, rel, el, _codes(engine_of[a:b], codes))
        g.reach = reach
        g.line = int(r.line)
        g.period = g.input_period(trips)
        if g.period is None:
            why.append(f"line {r.line}: its instructions' engines or dependencies do not repeat")
            continue
        fkey = ("steady_fields", id(events), a, b)  # (read only by repeats_until: after the cheaper checks)
        fields = memo.get(fkey)
        if fields is None or fields[0] is not events:
            fields = memo[fkey] = (events, list(map(_EVENT_FIELDS, events[a:b])))
        g.fields = fields[1]
        out.append(g)
    return out, "; ".join(why)


def _codes(names: list, codes: dict) -> Any:
    """``names`` (engines) as an array of small ints, one per name (``codes``: the numbering, extended)."""
    for e in sorted(set(names) - codes.keys()):
        codes[e] = len(codes)
    return np.fromiter(map(codes.__getitem__, names), np.int64, len(names))


def note(done: list, why: str) -> str:
    """One line on what the steady state did in a schedule: the loops written from a cycle, and why others not."""
    by_loop: dict = {}  # (line, total) -> [written, stretches, cycles]
    for line, skipped, total, q in done:
        rec = by_loop.setdefault((line, total), [0, 0, set()])
        rec[0] += skipped
        rec[1] += 1
        rec[2].add(q)
    parts = []
    for (line, total), (skipped, k, qs) in by_loop.items():
        cycles = "/".join(str(q) for q in sorted(qs))
        where = f" ({k} stretches)" if k > 1 else ""
        parts.append(
            f"loop at line {line}: {skipped:,} of {total:,} instructions written from a repeating cycle of "
            f"{cycles} iterations{where}"
        )
    if why:
        parts.append(f"scheduled event by event: {why}")
    return "; ".join(parts)


def same(x: list, y: list, t: float) -> bool:
    """Two lists of normalised times equal to within the tolerance at time ``t``."""
    tol = TOLERANCE * abs(t) + 1e-3
    return len(x) == len(y) and all(abs(p - q) <= tol for p, q in zip(x, y, strict=True))
