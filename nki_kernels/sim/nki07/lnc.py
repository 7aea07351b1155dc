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

import os
import shlex
import threading
from collections.abc import Callable

import numpy as np

from ..core.context import RunContext, activate
from ..core.errors import SimValueError
from ..core.trace import LoopFrame


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
        self.state: list[tuple[tuple, tuple[LoopFrame, ...], int]] = [(p, (), 0) for p in points]
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


# ---- the LNC degree of a launch and of the compiler (K10, K11) -------------------------------------------
ENV_KERNEL = "NEURON_LOGICAL_NC_CONFIG"
ENV_CC = "NEURON_CC_FLAGS"
_CC_OPTIONS = ("--lnc", "-lnc", "--logical-nc-config")


def env_degree() -> int | None:
    """K10: ``NEURON_LOGICAL_NC_CONFIG`` sets the LNC degree of a kernel called without brackets (SDK 2.33.1
    ``nki/get-started/about/lnc``: the degree "can be specified using the NEURON_LOGICAL_NC_CONFIG environment
    variable or via bracket syntax at the kernel call site"; the SDK supports a degree of 1 or 2).  None: unset."""
    v = os.environ.get(ENV_KERNEL, "").strip()
    if not v:
        return None
    if v not in ("1", "2"):
        raise SimValueError(
            "E011",
            "nki.jit",
            ENV_KERNEL,
            f"{ENV_KERNEL}={v!r}: the Neuron SDK supports an LNC degree of 1 or 2",
            f"Set {ENV_KERNEL}=1 or 2 (or unset it)",
        )
    return int(v)


def compiler_degree() -> tuple[int, str] | None:
    """The LNC degree neuronx-cc compiles with, when the environment declares it: ``--lnc`` /
    ``--logical-nc-config`` in ``NEURON_CC_FLAGS``, else ``NEURON_LOGICAL_NC_CONFIG`` (NCC_EVRF066 page:
    setting that variable makes neuronx-cc and the kernel agree).  ``(degree, where it came from)``; None when
    the environment says nothing (neuronx-cc then defaults to LNC=2 on trn2, but only a graph compilation,
    which the interpreter never does, would use it)."""
    try:
        toks = shlex.split(os.environ.get(ENV_CC, ""))
    except ValueError:
        toks = []
    found = None
    for i, t in enumerate(toks):
        name, eq, val = t.partition("=")
        if name not in _CC_OPTIONS:
            continue
        if not eq:
            val = toks[i + 1] if i + 1 < len(toks) else ""
        if val.strip().isdigit():
            found = (int(val), f"{ENV_CC} {name}={val.strip()}")  # the last one wins, as on a command line
    if found is not None:
        return found
    d = env_degree()
    return (d, f"{ENV_KERNEL}={d}") if d is not None else None


def check_degree(kernel_name: str, degree: int, how: str) -> None:
    """K11 (MIG 0.6 -> 0.7, SDK 2.33.1: "the compiler now validates that the kernel and compiler LNC degrees
    match"; error NCC_EVRF066): a kernel whose LNC degree differs from the one the environment gives
    neuronx-cc is rejected (E011)."""
    cc = compiler_degree()
    if cc is None or cc[0] == degree:
        return
    raise SimValueError(
        "E011",
        "nki.jit",
        "lnc",
        f"NKI kernel '{kernel_name}' is configured with LNC={degree} ({how}), but neuronx-cc is using "
        f"LNC={cc[0]} ({cc[1]}): the LNC degree is a property of the whole compiled graph (NCC_EVRF066)",
        f"Set {ENV_KERNEL} to the degree you compile with and call the kernel without brackets",
        got=degree,
        limit=cc[0],
    )
