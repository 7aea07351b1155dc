"""Loops of both front ends: ``affine_range`` / ``sequential_range`` / ``static_range`` (NKI 0.1 spec
§11; NKI 0.6 C1).  Each iteration pushes a :class:`~.trace.LoopFrame` on ``RunContext.loops`` (kind,
a loop id per entry into the loop statement, iteration, trip count, the loop statement's line), so
every event carries its loop context; ``SimOptions.shuffle_affine_seed`` shuffles ``affine_range``."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Sequence

from . import program as _program
from .context import maybe_current, unproven
from .errors import user_location
from .trace import LoopFrame, LoopKind, LoopRun

_new = tuple.__new__

MIN_TRIPS = 4  # iterations from which a loop may run as a program
# unrolled loops (an int index): a program only where sim/loopproof.py proves them; traced through inside a body
_UNROLLED = (LoopKind.STATIC, LoopKind.RANGE)

_KINDS = {
    "affine": LoopKind.AFFINE,
    "sequential": LoopKind.SEQUENTIAL,
    "static": LoopKind.STATIC,
    "range": LoopKind.RANGE,
}


def loop(
    kind: str, args: tuple, program: bool | str = False, check: Callable[[], str | None] | None = None
) -> Iterator[int]:
    """Iterate ``range(*args)`` as a loop of ``kind`` ("affine", "sequential", "static", "range").

    ``program``: True to run the loop as a loop program where the body allows (core/program.py): the front end
    traces this body once (NKI 0.1 ``affine_range`` / ``sequential_range`` / a kernel's ``range``), or its source
    shows every iteration runs the same Python (NKI 0.7 loops, NKI 0.1 ``static_range``: sim/loopproof.py); a
    string to say why not (shown by ``SimOptions.explain_loops``); False for a loop that is not traced once.
    ``check``: called after the two traced iterations, before the program is built: why the program may not run
    after all (the values the kernel's names hold then), or None."""
    r = builtins.range(*args)
    ctx = maybe_current()
    if ctx is None:
        yield from r
        return
    order: Sequence[int] = r  # the range itself unless shuffled (same values, no list)
    if kind == "affine" and ctx.shuffle_rng is not None and not ctx.skip_middle_end:
        order = list(r)
        ctx.shuffle_rng.shuffle(order)
    if kind == "affine" and not order:
        # an affine_range that runs zero times is hardware-unproven (spec Corrections 12)
        unproven(
            "pm.zero_trip_loop",
            f"nl.affine_range{tuple(args)} runs zero times (hardware-unproven); guard the "
            "loop with an `if` on the trip count",
        )
    outer = ctx.loops
    lk = _KINDS[kind]
    # "range": a Python `range` loop of an NKI 0.7 kernel (nki07/kernel.py): Python's own loop, so no loop frame or
    # loop id in its events, exactly as before the interpreter saw it; it may still run as a program
    frame = lk is not LoopKind.RANGE
    loop_id = ctx.next_loop_id() if frame else 0
    file, line = user_location()
    n, start, step = len(r), r.start, r.step
    if lk in _UNROLLED and (program is True and check is None or ctx.recorder is not None):
        # an unrolled loop: a program only where its source proves its iterations alike (check); in a body being
        # traced its iterations are part of that body's, whatever their number
        program = False
    if ctx.recorder is not None and ctx.recorder.inner_loop(n, order is not r) and program is not False:
        # a shorter loop in a body being traced: its iterations are part of the enclosing loop's program
        program = "traced as part of the enclosing loop's body"
    if program is True:
        if not ctx.options.loop_programs:
            program = "SimOptions(loop_programs=False)"
        elif order is not r:
            program = "shuffled iterations (SimOptions.shuffle_affine_seed)"
        else:
            # (of 3 iterations a program would run one at once after tracing two: building it costs about what it saves)
            program = _program.context_reason(ctx) or (f"fewer than {MIN_TRIPS} iterations" if n < MIN_TRIPS else True)
    if program.__class__ is str and ctx.options.explain_loops:
        _program.explain(program, kind, n, file, line)
    recs: list[_program.Recorder] = []
    resume = 0  # the first position the per-iteration path runs after a program ran the ones before it
    for pos, i in enumerate(order):
        if pos < resume:
            continue
        if frame:
            # tuple.__new__ directly: the LoopFrame(...) NamedTuple, without its Python-level __new__
            ctx.loops = outer + (_new(LoopFrame, (lk, loop_id, (i - start) // step, n, file, line)),)
        rec = None
        if program is True and len(recs) < 2:
            rec = _program.Recorder(ctx, n, frame)
            recs.append(rec)
            saved, ctx.recorder = ctx.recorder, rec
            rec.begin()
        try:
            yield i
        finally:
            ctx.loops = outer
            if rec is not None:
                ctx.recorder = saved
                rec.end()
        if len(recs) == 2:
            why = check() if check is not None else None
            built = why or _program.build(ctx, recs[0], recs[1], n, lk is not LoopKind.AFFINE)
            first, alloc0 = recs[0].seq0, recs[0].alloc0
            recs.clear()
            if ctx.options.explain_loops:
                _program.explain(built, kind, n, file, line)
            if isinstance(built, str):
                program = built
            else:
                resume = built.stop
                program = "ran as a program"  # (the iterations after it, if any, run per iteration)
                built.run(2)  # iterations 2..stop-1; those after it (the instruction cap) run per iteration
                r1 = built.r1
                per = r1.alloc1 - r1.alloc0
                if frame:  # (the cost model's fact of a loop; a Python `range` is no loop to it, as before)
                    ctx.trace.loop_runs.append(LoopRun(first, r1.n_instr, built.stop, file, line, alloc0 + 1, per))
                del built, r1  # (the program keeps the tensors from before the loop it read alive: no longer)
                if resume == n:
                    break
    races = ctx.races
    if races is not None and lk is LoopKind.AFFINE:
        races.close(loop_id)  # iteration races of this entry (E029, core/races.py)
