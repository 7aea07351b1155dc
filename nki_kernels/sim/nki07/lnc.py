"""LNC launches (``kernel[n]``): the ``n`` logical-core instances run in lockstep.

On hardware the instances of an SPMD/LNC launch run the same program at the same time, so a
kernel in which every core first initialises a shared output and then writes its own shard
(nki-library ``test_cascaded_max_utils``) is correct there but wrong if the instances ran one
after another.  The interpreter therefore runs each instance in its own thread and lets them
take turns one NKI call at a time (round robin, instance 0 first); only one thread ever runs,
so execution stays deterministic.  The scheduler is the run's ``RunContext.call_hook``, which
every NKI call runs on entry (``core.context.enter``).  Decision recorded in docs/nki-0.7-spec.md
(K4).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..core.context import RunContext, activate


class _Aborted(BaseException):
    """Unwinds the other instances when one of them raised."""


class Lockstep:
    """Runs the instances ``points`` of one launch in lockstep (module docstring)."""

    def __init__(self, ctx: RunContext, points: list):
        self.ctx, self.points, self.n = ctx, points, len(points)
        self.cv = threading.Condition()
        self.turn = 0
        self.alive = [True] * self.n
        # per instance: program_id, loop stack, HBM cursor
        self.state = [(p, (), 0) for p in points]
        self.results: list = [None] * self.n
        self.error: BaseException | None = None
        self.abort = False
        self.ids: dict = {}

    def _in(self, j: int) -> None:
        c = self.ctx
        c.program_id, c.loops, c.hbm_cursor = self.state[j]

    def _out(self, j: int) -> None:
        c = self.ctx
        self.state[j] = (c.program_id, c.loops, c.hbm_cursor)

    def _next(self, j: int) -> int:
        for k in range(1, self.n + 1):
            c = (j + k) % self.n
            if self.alive[c]:
                return c
        return -1

    def step(self) -> None:
        """The per-call hook: hand the turn to the next instance, wait for ours."""
        j = self.ids.get(threading.get_ident())
        if j is None:
            return
        with self.cv:
            self._out(j)
            self.turn = self._next(j)
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.turn == j or self.abort)
            if self.abort:
                raise _Aborted()
            self._in(j)

    def _worker(self, j: int, fn: Callable, args: list, kwargs: dict) -> None:
        self.ids[threading.get_ident()] = j
        with activate(self.ctx), np.errstate(all="ignore"):
            with self.cv:
                self.cv.wait_for(lambda: self.turn == j or self.abort)
                if self.abort:
                    self._finish(j)
                    return
                self._in(j)
            try:
                self.results[j] = fn(*args, **kwargs)
            except _Aborted:
                pass
            except BaseException as e:  # noqa: BLE001 - re-raised in the launching thread
                with self.cv:
                    if self.error is None:
                        self.error = e
                    self.abort = True
            finally:
                self._finish(j)

    def _finish(self, j: int) -> None:
        with self.cv:
            self.alive[j] = False
            self.turn = self._next(j)
            self.cv.notify_all()

    def run(self, fn: Callable, args: list, kwargs: dict) -> list:
        """Run ``fn(*args, **kwargs)`` once per instance; the instances' return values."""
        ctx = self.ctx
        prev = ctx.call_hook
        ctx.call_hook = self.step
        try:
            threads = [
                threading.Thread(target=self._worker, args=(j, fn, args, kwargs), daemon=True) for j in range(self.n)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            ctx.call_hook = prev
            ctx.program_id, ctx.loops = self.points[0], ()
        if self.error is not None:
            raise self.error
        return self.results
