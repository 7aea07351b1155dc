"""Per-run state: options, memory accounting (memory.py), the instruction trace, SPMD ids, loop stack.

One :class:`RunContext` exists while ``simulate_kernel`` runs a kernel; NKI APIs find it
with :func:`current` and raise E019 when called outside a kernel (as neuronxcc does).
"""
from __future__ import annotations

import os
import random
import sys
import threading
import warnings

from .errors import _SIM_DIR, SimRuntimeError, SimValueError, SimWarning, user_location
from .memory import Memory
from .options import SimOptions
from .trace import Event, Trace

_local = threading.local()


def current(api: str | None = None) -> "RunContext":
    ctx = getattr(_local, "ctx", None)
    if ctx is None and api is not None:
        raise SimRuntimeError("E019", api, None, "calling NKI API outside of NKI kernels is not supported",
                              "Call it inside an @nki.jit kernel run by nki.simulate_kernel(kernel, *args)")
    return ctx


def maybe_current() -> "RunContext | None":
    return getattr(_local, "ctx", None)


class RunContext:
    def __init__(self, options: SimOptions, kernel_name: str = "", grid: tuple = ()):
        self.options = options
        self.memory = Memory(options)
        self.trace = Trace(kernel_name=kernel_name, grid=grid)
        self.program_id: tuple = ()
        self.grid: tuple = grid
        self.loops: tuple = ()        # enclosing loops, outermost first (immutable: shared by events)
        self.skip_middle_end = False
        self.hbm_registry: list = []      # HBM allocations of instance 0, shared by later instances
        self.hbm_cursor = 0
        self._alloc_id = 0
        self._warned: set = set()
        self.rng = None
        if options.shuffle_affine_seed is not None:
            self.rng = random.Random(options.shuffle_affine_seed)

    # -- trace -------------------------------------------------------------------------
    def record(self, op, api, engine, partitions=0, free_elems=0, in_shapes=(), out_shape=(),
               in_dtypes=(), out_dtype="", nbytes=0, flops=0, reads=(), writes=(), meta=None,
               accumulate=False, result=None) -> Event | None:
        """THE instruction-recording path: every instruction the interpreter executes passes
        here exactly once (capacity check, block liveness, trace event), after its operands were
        validated.  ``result``: the instruction's fresh result allocation, if any."""
        if self.memory.dirty:
            self.memory.check(api, result)
        if not self.options.trace:
            return None
        if self.memory.blocks:
            self.memory.block_liveness(reads, writes)
        f = sys._getframe(1)
        while f.f_code.co_filename.startswith(_SIM_DIR):
            f = f.f_back
        events = self.trace.events
        ev = Event(len(events), op, api, engine, partitions, free_elems, tuple(in_shapes), out_shape,
                   tuple(in_dtypes), out_dtype, nbytes, flops, list(reads), list(writes), accumulate,
                   meta if meta is not None else {}, f.f_code.co_filename, f.f_lineno, self.program_id,
                   self.loops)
        events.append(ev)
        return ev

    def warn_once(self, key, message: str) -> None:
        file, line = user_location()
        k = (key, file, line)
        if k in self._warned:
            return
        self._warned.add(k)
        warnings.warn_explicit(f"{message} at {os.path.basename(file)}:{line}", SimWarning, file, line)

    def finish(self) -> Trace:
        self.trace.peak_sbuf_bytes_per_partition = self.memory.peak["sbuf"]
        self.trace.peak_psum_bytes_per_partition = self.memory.peak["psum"]
        return self.trace


def unproven(key, message: str) -> None:
    """A construct that is legal on paper but has public evidence of trouble on hardware (issue 8
    'Too lax'): a SimWarning naming the user's line, once per line; an E024 error under
    ``SimOptions.strict``."""
    ctx = maybe_current()
    if ctx is None:
        return
    if ctx.options.strict:
        raise SimValueError("E024", "strict", None, message,
                            "SimOptions(strict=True) rejects hardware-unproven constructs; rewrite it or run "
                            "without strict to get a warning")
    ctx.warn_once(key, message)


class activate:
    """Context manager installing a RunContext as current (re-entrant for nested runs)."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def __enter__(self):
        self.prev = getattr(_local, "ctx", None)
        _local.ctx = self.ctx
        return self.ctx

    def __exit__(self, *exc):
        _local.ctx = self.prev
        return False
