"""LNC launches (``kernel[n]``): the ``n`` logical-core instances run in lockstep.

On hardware the instances of an SPMD/LNC launch run the same program at the same time, so a
kernel in which every core first initialises a shared output and then writes its own shard
(nki-library ``test_cascaded_max_utils``) is correct there but wrong if the instances ran one
after another.  The interpreter therefore runs each instance in its own thread and lets them
take turns one NKI call at a time (round robin, instance 0 first); only one thread ever runs,
so execution stays deterministic.  Decision recorded in docs/nki-0.7-spec.md (K4).
"""
from __future__ import annotations

import functools
import itertools
import threading
import types

import numpy as np

from . import _core as C

_active = None      # the scheduler of the LNC launch being run, if any


class _Aborted(BaseException):
    """Unwinds the other instances when one of them raised."""


def step():
    """Called by every NKI instruction of the 0.7 front end: hand the turn to the next instance."""
    s = _active
    if s is not None:
        s.step()


def instruction(fn):
    """Decorator: ``fn`` is one NKI call, a scheduling point of an LNC launch."""
    @functools.wraps(fn)
    def w(*args, **kwargs):
        if _active is not None:
            _active.step()
        return fn(*args, **kwargs)
    return w


class Lockstep:
    def __init__(self, ctx, points):
        self.ctx, self.points, self.n = ctx, points, len(points)
        self.cv = threading.Condition()
        self.turn = 0
        self.alive = [True] * self.n
        self.state = [(p, (), 0) for p in points]      # program_id, loop stack, HBM cursor
        self.results = [None] * self.n
        self.error = None
        self.abort = False
        self.ids = {}

    def _in(self, j):
        self.ctx.program_id, self.ctx.loops, self.ctx.hbm_cursor = self.state[j]

    def _out(self, j):
        self.state[j] = (self.ctx.program_id, self.ctx.loops, self.ctx.hbm_cursor)

    def _next(self, j):
        for k in range(1, self.n + 1):
            c = (j + k) % self.n
            if self.alive[c]:
                return c
        return -1

    def step(self):
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

    def _worker(self, j, fn, args, kwargs):
        self.ids[threading.get_ident()] = j
        with C.activate(self.ctx), np.errstate(all="ignore"):
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
            except BaseException as e:          # noqa: BLE001 - re-raised in the launching thread
                with self.cv:
                    if self.error is None:
                        self.error = e
                    self.abort = True
            finally:
                self._finish(j)

    def _finish(self, j):
        with self.cv:
            self.alive[j] = False
            self.turn = self._next(j)
            self.cv.notify_all()

    def run(self, fn, args, kwargs):
        global _active
        prev = _active
        _active = self
        try:
            threads = [threading.Thread(target=self._worker, args=(j, fn, args, kwargs), daemon=True)
                       for j in range(self.n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            _active = prev
            self.ctx.program_id, self.ctx.loops = self.points[0], ()
        if self.error is not None:
            raise self.error
        return self.results


def lnc_entry(fn):
    """Wrap a kernel entry so that a multi-instance launch runs all instances in lockstep on the
    core runner's first call and hands out the instances' results on its later calls."""
    memo = {}

    def entry(*args, **kwargs):
        ctx = C.current("kernel")
        points = list(itertools.product(*[range(g) for g in ctx.grid])) if ctx.grid else [()]
        if len(points) == 1 or _active is not None:
            return fn(*args, **kwargs)
        pid = ctx.program_id
        if pid == points[0]:
            memo[id(ctx)] = dict(zip(points, Lockstep(ctx, points).run(fn, args, kwargs)))
        return memo[id(ctx)][pid] if pid != points[-1] else memo.pop(id(ctx))[pid]
    return entry


def make_scheduling_points(namespace: dict, module_name: str, skip=()) -> None:
    """Wrap every public function defined in ``module_name`` (its ``globals()``) with
    :func:`instruction`, so each NKI call is a scheduling point of an LNC launch; ``skip`` names
    the functions that are not instructions (loops, queries, host-side helpers)."""
    for name, fn in list(namespace.items()):
        if isinstance(fn, types.FunctionType) and not name.startswith("_") and name not in skip \
                and fn.__module__ == module_name:
            w = instruction(fn)
            if hasattr(fn, "_nki_op"):
                w._nki_op = fn._nki_op
            namespace[name] = w
