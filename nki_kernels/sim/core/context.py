"""Per-run state: :class:`RunContext` -- options, memory accounting (memory.py), the trace, SPMD ids,
the loop stack, the result waiting for its destination, accumulator registers, RNG state, hooks.

One :class:`RunContext` exists while a kernel runs.  Every field is declared here (``__slots__``):
no module adds state to a run at run time.  NKI calls of either front end find the run with
:func:`enter` (E019 outside a kernel), which also runs the run's per-call hook (the LNC lockstep
scheduler of an NKI 0.7 launch, chosen by the runner).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import warnings
from collections.abc import Callable, Collection, Container, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import numpy as np

from . import limits
from .errors import _SIM_DIR, SimRuntimeError, SimWarning, instruction_cap, user_location
from .memory import Memory
from .options import SimOptions
from .policy import enforce
from .trace import COMPUTE_OPS, DMA_OPS, Event, Trace

_new = tuple.__new__

if TYPE_CHECKING:
    from types import FrameType

    from .memory import Alloc
    from .ops import Result
    from .program import Recorder
    from .races import RaceLog
    from .tensor import Tensor
    from .trace import Engine, LoopFrame, Payload, Region

_local = threading.local()
_last_run: RunContext | None = None


@overload
def current(api: str) -> RunContext: ...
@overload
def current(api: None = None) -> RunContext | None: ...


def current(api: str | None = None) -> RunContext | None:
    """The run of this thread; with ``api``, E019 when there is none (an NKI call outside a kernel)."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None and api is not None:
        raise SimRuntimeError(
            "E019",
            api,
            None,
            "calling NKI API outside of NKI kernels is not supported",
            "Call it inside an @nki.jit kernel run by nki.simulate_kernel(kernel, *args)",
        )
    return ctx


def maybe_current() -> RunContext | None:
    return getattr(_local, "ctx", None)


def current_run() -> RunContext | None:
    """The most recently started run in any thread (progress reporting polls it; not thread-local)."""
    return _last_run


def enter(api: str, instruction: bool = True) -> RunContext:
    """The entry of every NKI call of both front ends: the run (E019 outside a kernel) and the run's
    per-call hook; ``api`` names the call in messages."""
    ctx: RunContext | None = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = current(api)  # raises E019
    hook = ctx.call_hook
    if hook is not None:
        hook()
    ctx.api = api
    ctx.engine_given = False  # the front end's adapter sets it when the call names its engine
    # the user's line of this call: the first frame outside the interpreter, found once per call
    f = sys._getframe(2)
    while f.f_code.co_filename.startswith(_SIM_DIR):
        back = f.f_back
        assert back is not None, "an NKI call has a caller outside the interpreter"
        f = back
    ctx.site = (f.f_code.co_filename, f.f_lineno)
    sc = ctx.scopes
    if sc is not None and id(f.f_code) not in sc.quiet:
        sc.on_call(ctx, f)  # the front end's source rules for this line (NKI 0.1: nki01/scopes.py)
    return ctx


enter_landing = enter  # an assignment / `+=` (named for the reader: it may land a pending result)


class DirectAllocationHook(Protocol):
    """``RunContext.direct``: the front end's direct-allocation state (NKI 0.1: nki01/allocation.py), as the core
    uses it."""

    @property
    def active(self) -> Collection[str]: ...  # buffers allocated directly
    @property
    def first_auto(self) -> Container[str]: ...  # buffers with an automatically allocated tensor
    def automatic(self, buffer: str, what: str, where: tuple[Any, ...], api: str = "") -> None: ...
    def instruction(self, reads: Sequence[Region], writes: Sequence[Region], where: tuple[str, int]) -> None: ...


class SourceRulesHook(Protocol):
    """``RunContext.scopes``: the front end's per-call source checker (NKI 0.1: nki01/scopes.py), as the core
    uses it."""

    @property
    def quiet(self) -> Container[int]: ...  # ids of the code objects without checks
    def on_call(self, ctx: RunContext, f: FrameType) -> None: ...
    def check_shared_hbm(self, api: str) -> None: ...


class RunContext:
    """The state of one kernel run (every field declared)."""

    __slots__ = (
        "options",  # SimOptions of the run
        "memory",  # Memory: live SBUF/PSUM bytes, capacity policy
        "trace",  # Trace: the recorded events
        "program_id",  # SPMD / LNC instance index tuple of the running instance
        "grid",  # launch grid
        "loops",  # enclosing loops (tuple of trace.LoopFrame), outermost first
        "skip_middle_end",  # compiler flag: affine_range behaves as sequential_range (never shuffled)
        "hbm_registry",  # shared HBM allocations of the launch in creation order; each instance takes them in turn
        "hbm_cursor",  # position of the running instance in hbm_registry
        "shuffle_rng",  # random.Random of SimOptions.shuffle_affine_seed (None: no shuffling)
        "rand_rng",  # numpy Generator of nl.rand (seeded 0 at the start of a run, nl.random_seed)
        "vector_acc",  # VectorE accumulator registers (select_reduce, range_select, ...), fp32 per partition
        "act_acc",  # ScalarE activation accumulator registers (activation reduce_cmd), fp32 per partition
        "pending",  # results waiting for their destination (ops.Result), in program order
        "call_hook",  # called at every NKI call (the LNC lockstep scheduler) or None
        "n_instructions",  # instructions executed so far (counted also without a trace)
        "api",  # the NKI call being executed (for messages)
        "engine_given",  # the running NKI call names its engine (engine=): recorded on its event
        "site",  # (file, line) of that call in the user's code
        "alloc_count",  # allocation id counter
        "loop_count",  # loop id counter (one id per entry into a loop statement)
        "warned",  # (key, file, line) of the warnings already given
        "tensor_cls",  # the class of new tensors (the front end's Tensor subclass)
        "direct",  # the front end's direct-allocation state (nki01/allocation.py) or None
        "scopes",  # the front end's per-call source checker (on_call(ctx, frame)) or None
        "races",  # races.RaceLog of the run (iteration races, E029) or None
        "recorder",  # program.Recorder of the loop body being traced (core/program.py) or None
    )

    def __init__(
        self,
        options: SimOptions,
        kernel_name: str = "",
        grid: tuple = (),
        tensor_cls: type[Tensor] | None = None,
    ):
        self.options = options
        self.warned: set = set()  # (key, file, line) of the warnings already given
        self.memory = Memory(options, self.warned)
        self.trace = Trace(kernel_name=kernel_name, grid=grid)
        self.program_id: tuple = ()
        self.grid: tuple = grid
        self.loops: tuple[LoopFrame, ...] = ()
        self.skip_middle_end = False
        self.hbm_registry: list = []
        self.hbm_cursor = 0
        self.shuffle_rng = (
            random.Random(options.shuffle_affine_seed) if options.shuffle_affine_seed is not None else None
        )
        self.rand_rng = np.random.default_rng(0)
        self.vector_acc = np.zeros(limits.PMAX, dtype=np.float32)
        self.act_acc = np.zeros(limits.PMAX, dtype=np.float32)
        self.pending: list[Result] = []
        self.call_hook: Callable[[], None] | None = None
        self.n_instructions = 0
        self.api = ""
        self.engine_given = False
        self.site = ("<unknown>", 0)
        self.alloc_count = 0
        self.loop_count = 0
        self.tensor_cls = tensor_cls
        self.direct: DirectAllocationHook | None = None
        self.scopes: SourceRulesHook | None = None
        self.races: RaceLog | None = None
        self.recorder: Recorder | None = None
        global _last_run
        _last_run = self

    # -- trace -------------------------------------------------------------------------
    def record(
        self,
        op: str,
        api: str,
        engine: Engine,
        partitions: int = 0,
        free_elems: int = 0,
        in_shapes: Sequence[tuple[int, ...]] = (),
        out_shape: Sequence[int] = (),
        in_dtypes: Sequence[str] = (),
        out_dtype: str = "",
        nbytes: int = 0,
        flops: int = 0,
        reads: Sequence[Region] = (),
        writes: Sequence[Region] = (),
        payload: Payload | None = None,
        result: Alloc | None = None,
        where: tuple | None = None,
        seq: int | None = None,
    ) -> Event | None:
        """THE instruction-recording path: every instruction the interpreter executes passes
        here exactly once (capacity check, block liveness, trace event), after its operands were
        validated and its result landed.  ``result``: the instruction's fresh result allocation, if
        any (not counted against capacity until the next instruction); ``where``: (file, line,
        program_id, loops) captured when the instruction ran (default: now); ``seq``: the trace
        position reserved when the instruction ran (:meth:`reserve`; default: the end)."""
        assert op in (DMA_OPS if engine == "DMA" else COMPUTE_OPS), f"an instruction trace.py does not list: {op}"
        self.n_instructions += 1
        if self.n_instructions > self.options.max_instructions:  # a runaway kernel (E031)
            raise instruction_cap(api, self.options.max_instructions)
        if self.memory.dirty:
            self.memory.check(api, result)
        if not self.options.trace:
            return None
        if self.memory.blocks:
            self.memory.block_liveness(reads, writes)
        if where is None:
            site = self.site
            where = (site[0], site[1], self.program_id, self.loops, self.engine_given)
        direct = self.direct
        if direct is not None and direct.active:
            direct.instruction(reads, writes, (where[0], where[1]))
        events = self.trace.events
        assert payload is not None, "a traced instruction has a payload"
        # tuple.__new__ directly: what Event(...) does, without the NamedTuple's Python-level __new__ (once per
        # instruction)
        ev = _new(
            Event,
            (
                len(events) if seq is None else seq,
                op,
                api,
                engine,
                partitions,
                free_elems,
                tuple(in_shapes),
                tuple(out_shape),
                tuple(in_dtypes),
                out_dtype,
                nbytes,
                flops,
                tuple(reads),
                tuple(writes),
                payload,
                where[0],
                where[1],
                where[2],
                where[3],
                len(where) > 4 and where[4],
            ),
        )
        if seq is None:
            events.append(ev)
        else:
            events[seq] = ev
        return ev

    def reserve(self) -> int:
        """Reserve the next trace position for an instruction whose event is recorded later (its
        result waits for its destination): program order stays exact.  -1 without a trace."""
        if not self.options.trace:
            return -1
        events = self.trace.events
        events.append(None)
        return len(events) - 1

    def where(self) -> tuple:
        """(file, line, program_id, loops, engine_given) of the running NKI call, for a result recorded later."""
        site = self.site
        return (site[0], site[1], self.program_id, self.loops, self.engine_given)

    def commit_pending(self) -> None:
        """Record every pending result with its new tile as its destination (``ops.Result.commit``)."""
        while self.pending:
            self.pending[0].commit(self)

    def next_loop_id(self) -> int:
        """A fresh loop id (one per entry into a loop statement within this run)."""
        self.loop_count += 1
        return self.loop_count

    def next_alloc_id(self) -> int:
        self.alloc_count += 1
        return self.alloc_count

    def warn_once(self, key: Hashable, message: str) -> None:
        file, line = user_location()
        k = (key, file, line)
        if k in self.warned:
            return
        self.warned.add(k)
        warnings.warn_explicit(f"{message} at {os.path.basename(file)}:{line}", SimWarning, file, line)

    def finish(self) -> Trace:
        if self.pending:
            self.commit_pending()
        self.trace.peak_sbuf_bytes_per_partition = self.memory.peak["sbuf"]
        self.trace.peak_psum_bytes_per_partition = self.memory.peak["psum"]
        return self.trace


def lenient(
    rule: str,
    what: str,
    fix: str | None = None,
    *,
    op: str | None = None,
    arg: str | None = None,
    where: tuple[str, int] | None = None,
    error: bool = False,
) -> None:
    """The never-stricter policy (``policy.py``) applied to one finding of the lenient ``rule``: under
    ``SimOptions.strict`` (or with ``error``: a mode in which the sources do make it an error, e.g. NKI 0.7's
    ``NKI_COMPILER_FRONTEND=custom``) the rule's coded error; otherwise a SimWarning naming the rule and that code,
    once per (rule, line).  ``where`` is the (file, line) to blame, by default the user's line."""
    ctx = maybe_current()
    if ctx is not None:
        strict = error or ctx.options.strict
        enforce(rule, strict, ctx.warned, what, fix, op=op, arg=arg, where=where or user_location())


def unproven(rule: str, message: str) -> None:
    """A construct that is legal on paper but has public evidence of trouble on hardware: the lenient ``rule``
    (its code E024: a SimWarning naming the user's line, once per line; the error under ``SimOptions.strict``)."""
    lenient(rule, message, op="strict")


class activate:
    """Context manager installing a RunContext as current (re-entrant for nested runs)."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def __enter__(self) -> RunContext:
        self.prev = getattr(_local, "ctx", None)
        _local.ctx = self.ctx
        return self.ctx

    def __exit__(self, *exc: object) -> Literal[False]:
        _local.ctx = self.prev
        return False
