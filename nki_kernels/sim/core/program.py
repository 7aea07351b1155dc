"""The loop program: an ``affine_range`` body traced, then run for every other iteration at once.

The NKI 0.1 front end traces a loop body once, with a symbolic index, into a program the compiler
schedules (aws-neuron-sdk@81ce03ae nki/migration/index.rst, "Consistent control flow behavior").  The
interpreter does the same for the bodies it can prove affine and independent (an unrolled loop -- NKI 0.7's, NKI
0.1's ``static_range`` -- where sim/loopproof.py proves from its source what the symbolic index gives):

1. **Trace.**  Iterations 0 and 1 run through the ordinary path (every check, every event), while a
   :class:`Recorder` notes each NKI call at the front end's adapter boundary (the core op, its
   operands as views, its result), the slices the kernel took with the loop index, and what the calls
   allocated.  Two iterations, not one: the difference between them gives each view's step per
   iteration without threading the symbolic index through every view.
2. **Program.**  :func:`build` turns the two recordings into a :class:`Program`: one typed
   :class:`Step` per instruction (an :class:`Op`, its destination and sources as :class:`View`
   templates: allocation, byte offset, byte step per iteration, shape, strides) and the events of
   iteration 1 as templates.  It proves what the per-iteration path would have checked for the other
   iterations: the same calls with the same options, views that move by a constant step (every loop
   index the body used was affine), slices in bounds at the last iteration (affine: the extremes are
   the first and last iterations), no iteration touching what another writes (exact: per element,
   over every iteration), no body tile read before the body wrote it, the instruction cap.  A loop in the body
   with no more iterations than the loop is traced through (its calls are steps); a buffer from before an
   ordered loop that every iteration refills before reading it is scratch (a copy per iteration); ``ps +=
   nc_matmul(...)`` into a PSUM tile from before the loop is a reduction.
3. **Executor.**  :meth:`Program.run` runs iterations 2..n-1 as one NumPy operation per step over all
   of them (in chunks that bound memory), with the same fp32 functions and the same rounding at the
   destination as the op core (a matmul is the op core's GEMM per iteration, a reduction into PSUM from before
   the loop is added iteration by iteration, a loop-invariant step is computed once), and appends the events
   the per-iteration path would have recorded.  An ordered loop whose iterations depend on each other (a tensor
   from before the loop each iteration updates, a tile carried to the next iteration: ``View.lag``, a result
   waiting for its destination at the end of the body) runs its iterations in order, one at a time
   (``Program.sequential``).

Anything it cannot prove falls back to the per-iteration path, which then raises or warns exactly as
before at the first failing iteration; ``SimOptions(explain_loops=True)`` (``nki-kernels run
--verbose``) prints which loops ran as programs and why the others did not.  docs/architecture.md
lists the fallback cases.  ``simulator_tests/test_sim_loop_program.py`` runs every case both ways and
compares outputs bit for bit and traces event for event.
"""

from __future__ import annotations

import enum
import functools
import inspect
import math
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import dtypes as dt
from .errors import _SIM_DIR
from .memory import BY_TENSOR_ENGINE
from .ops import BINARY, BITWISE, PENDING, UNARY, opcode, reduce_values
from .tensor import Tensor
from .tensore import gemm_t
from .trace import Buffer, Event, LoopFrame, LoopKind, Region, no_gc

if TYPE_CHECKING:
    from .context import RunContext
    from .memory import Alloc

_new = tuple.__new__
_region = functools.partial(_new, Region)  # Region(*fields) without a Python-level call
_event = functools.partial(_new, Event)
_frame = functools.partial(_new, LoopFrame)

# Bytes of NumPy arrays one chunk of iterations may create (batched body tiles and values).
CHUNK_BYTES = 64 << 20
# Instructions one traced iteration may record: a longer body (a whole kernel inside a short loop, helpers' loops
# traced through) costs more to record and prove than the few iterations a program would run save.
MAX_BODY_CALLS = 4096


class Op(enum.Enum):
    """The instructions a program runs over all iterations at once (the core op each comes from)."""

    DMA = "dma"  # dma_copy / nl.load / nl.store between HBM and SBUF: dst = src, rounded to dst's dtype
    DMA_TRANSPOSE = "dma_transpose"  # nl.load_transpose2d: dst = src.T (a 2-D HBM view), rounded to dst's dtype
    TENSOR_TENSOR = "tensor_tensor"  # nisa.tensor_tensor: BINARY[op](data1, data2) in fp32
    BINARY = "binary"  # nl.add & co. of tiles (partition-first broadcasting) and numbers
    UNARY = "unary"  # nl.exp & co.: UNARY[name](x) in fp32
    TENSOR_COPY = "tensor_copy"  # nisa.tensor_copy / nl.copy
    TENSOR_SCALAR = "tensor_scalar"  # nisa.tensor_scalar: (data op0 operand0) op1 operand1, scalars or (P, 1) columns
    TRANSPOSE = "transpose"  # nisa.nc_transpose / nl.transpose: the (P, F) view of data, transposed
    BROADCAST = "broadcast"  # nl.broadcast_to / t.broadcast_to: a copy of src broadcast partition-first
    FILL = "fill"  # nl.zeros / ones / full: the new tile's storage as the traced iteration filled it
    MATMUL = "matmul"  # nisa.nc_matmul: stationary.T @ moving (tensore.gemm_t, per iteration), `psum += r` accumulating
    TENSOR_REDUCE = "tensor_reduce"  # nisa.tensor_reduce / nl.max / nl.min (exact in any order) over free axes
    ACTIVATION = "activation"  # nisa.activation: op(data * scale + bias), bias a number or a (P, 1) column


# core op name -> the program's Op (a call of any other op keeps the loop on the per-iteration path)
_OPS = {
    "dma_copy": Op.DMA,
    "load": Op.DMA,
    "store": Op.DMA,
    "load_transpose2d": Op.DMA_TRANSPOSE,
    "tensor_tensor": Op.TENSOR_TENSOR,
    "binary": Op.BINARY,
    "unary": Op.UNARY,
    "tensor_copy": Op.TENSOR_COPY,
    "tensor_scalar": Op.TENSOR_SCALAR,
    "fill": Op.FILL,
    "broadcast_to": Op.BROADCAST,
    "nc_transpose": Op.TRANSPOSE,
    "transpose": Op.TRANSPOSE,  # nl.transpose: one nc_transpose on TensorE (tensore.transpose)
    "nc_matmul": Op.MATMUL,
    "matmul": Op.MATMUL,  # nl.matmul with transpose_x=True: one nc_matmul (tensore.matmul)
    "tensor_reduce": Op.TENSOR_REDUCE,
    "reduce": Op.TENSOR_REDUCE,  # nl.max / nl.min (nl.sum & co. add in the device's order: not a program's step)
    "activation": Op.ACTIVATION,
}
# arguments that change values or the instruction (masks, read-modify-write, indirect addressing, the ScalarE
# accumulator registers, PE tiling): not in a program
_VALUE_KWARGS = (
    "mask",
    "dst_rmw_op",
    "oob_mode",
    "reduce_res",
    "reduce_cmd",
    "reduce_op",
    "tile_position",
    "tile_size",
)
_PLAIN = (str, bool, int, float)
# how a pending result lands (Recorder.landed): `t[...] = r` ("same", "reshape"); `ps += r` onto PSUM written
# everywhere, added in place ("accumulate"); the first `ps += r` onto PSUM not yet written everywhere ("first +=")
_LANDINGS = ("same", "reshape", "accumulate", "first +=")
_VALUES = (enum.Enum, np.generic, np.dtype, type)  # enum members, NumPy scalars, dtypes (np.float32 or its dtype)
# core op -> (its signature, whether it has only named parameters, the positional names and all names after ctx, dst)
_SIGNATURES: dict[Callable, tuple[inspect.Signature, bool, tuple[str, ...], tuple[str, ...]]] = {}


def _bind(fn: Callable, args: tuple, kw: dict) -> dict[str, Any] | None:
    """The arguments of ``fn(ctx, dst, *args, **kw)`` (a call that ran) by parameter name, in the signature's order,
    as ``inspect.Signature.bind(...).arguments`` without ctx and dst (its work done once per op); None if they do
    not bind."""
    spec = _SIGNATURES.get(fn)
    if spec is None:
        sig = inspect.signature(fn)
        ps = list(sig.parameters.values())[2:]
        named = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in ps)
        pos = tuple(p.name for p in ps if p.kind is p.POSITIONAL_OR_KEYWORD)
        spec = _SIGNATURES[fn] = (sig, named, pos, tuple(p.name for p in ps))
    sig, named, pos, order = spec
    if not named:
        try:
            return dict(list(sig.bind(None, None, *args, **kw).arguments.items())[2:])
        except TypeError:
            return None
    if len(args) > len(pos) or any(k not in order or k in pos[: len(args)] for k in kw):
        return None
    given = dict(zip(pos, args, strict=False))  # (args may be fewer than pos)
    given.update(kw)
    return {k: given[k] for k in order if k in given}


def _is_function(v: object) -> bool:
    """An op code given as a function (np.add, nl.add), not a loop index or a tensor."""
    return isinstance(v, (types.FunctionType, types.BuiltinFunctionType, np.ufunc)) or hasattr(v, "_nki_op")


class View(NamedTuple):
    """An operand of a step: a basic view of one allocation.  ``body``: the allocation is made by the
    body (each iteration its own; ``alloc`` is then its position among the body's allocations) or else
    it exists before the loop (``alloc`` its id); ``offset``: bytes from the start of the allocation's
    storage in iteration 0; ``step``: bytes the view moves per iteration (0 for a body allocation)."""

    body: bool
    alloc: int
    offset: int
    step: int
    shape: tuple
    strides: tuple
    sdtype: np.dtype
    items: np.ndarray | None = None  # an index-array view: the item offset of each element in iteration 0
    # 1: a body tile of the previous iteration (an ordered loop carrying a tile: ``t = f(t)``; iteration 0 read one
    # from before the loop), read in order by Program.run
    lag: int = 0


class Step(NamedTuple):
    """One instruction of the program: ``dst = f(*srcs)`` rounded to ``dtype`` (the destination's)."""

    op: Op
    func: Any  # the fp32 function; for tensor_scalar ((function, operand, reversed), ...)
    dst: View
    srcs: tuple
    dtype: Any
    line: int
    # (view, NKI dtype, how) of the tile the result lands in: `t[...] = r` ("same", "reshape"), `ps += r` ("accumulate")
    landing: tuple | None = None


class Ref(NamedTuple):
    """A tensor argument of a :class:`Call`: its position in ``Call.views``."""

    pos: int


class Call(NamedTuple):
    """One NKI call as the recorder saw it (no tile objects kept: a reference would keep the tile's
    SBUF bytes live in the next iteration)."""

    name: str
    params: tuple  # (name, value) of the call's other arguments; a tensor's value is a Ref to its view
    views: tuple  # (dst, *tensor arguments) as (alloc id, offset, shape, strides, storage dtype, NKI dtype)
    line: int

    def param(self, name: str) -> Any:
        for k, v in self.params:
            if k == name:
                return v
        return None


def _root(arr: np.ndarray) -> np.ndarray:
    """The outermost array of ``arr``'s dtype that ``arr`` views (poisoned storage is a float view of an int array)."""
    while isinstance(arr.base, np.ndarray) and arr.base.dtype == arr.dtype:
        arr = arr.base
    return arr


def _describe(t: Tensor) -> tuple | str:
    """(alloc id, byte offset in the allocation's storage, shape, strides, storage dtype, NKI dtype, index arrays)
    or why not.  ``strides`` of an index-array view are its parent's, the index arrays (an int or an array per axis
    of the parent, broadcast to the view's shape) pick its elements; None for a basic view."""
    if t._mask is not None or t.dynamic or t.out_of_bounds:
        return "an operand with a mask or a runtime index"
    al = t.alloc
    root = _root(al.array)
    arr = t.arr if t.arr is not None else t.src
    if arr is None or not root.flags.c_contiguous or arr.dtype != root.dtype:
        return "an operand whose storage is not contiguous or is reinterpreted"
    off = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if t.arr is not None or t.key is None:
        return (al.id, off, arr.shape, arr.strides, arr.dtype, al.dtype, None)
    key = tuple(k if isinstance(k, np.ndarray) else int(k) for k in t.key)
    return (al.id, off, tuple(t._shape), (arr.shape, arr.strides), arr.dtype, al.dtype, key)


class Recorder:
    """What one traced iteration did: its NKI calls, its index slices, its allocations and events."""

    __slots__ = (
        "ctx",
        "calls",
        "slices",
        "reason",
        "alloc0",
        "alloc1",
        "seq0",
        "seq1",
        "n_instr",
        "pre",
        "body",
        "landings",
        "n",
        "loops0",
        "n_loops",
        "depth",
        "scans",
        "pending_end",
        "frame",
    )

    def __init__(self, ctx: RunContext, n: int = 0, frame: bool = True):
        self.ctx = ctx
        self.n = n  # the loop's trip count (a loop in the body with fewer iterations is traced through)
        # the loop has a frame in its events' loops (not a Python `range` of an NKI 0.7 kernel: core/loops.py)
        self.frame = frame
        # the position of the loop's frame in its events' loops (frameless: where the body's loops' frames start)
        self.depth = len(ctx.loops) - 1 if frame else len(ctx.loops)
        # tensors from before the loop that may hold poison: their clean reads so far, at the end of the iteration
        self.scans: dict[int, int] = {}
        self.calls: list[Call] = []
        self.slices: list[tuple[int, int, int]] = []  # (dimension size, start, stop) indexed with a loop index
        self.reason: str | None = None
        self.alloc0 = self.alloc1 = ctx.alloc_count
        self.seq0 = self.seq1 = len(ctx.trace.events)
        self.n_instr = ctx.n_instructions
        # allocations from before the iteration the body uses, by id (weakly: a tile the previous iteration made, or
        # one from before the loop the kernel drops in the loop, is freed when the kernel drops it, as without programs)
        self.pre: dict[int, weakref.ref] = {}
        # the body's allocations by position (1-based) among them: (weak reference, shape and dtype of the storage)
        self.body: dict[int, tuple[weakref.ref, tuple, np.dtype]] = {}
        # call position -> (view description, how) of the tile its pending result landed in (`t[...] = r`)
        self.landings: dict[int, tuple[tuple, str]] = {}
        self.loops0 = ctx.loop_count
        self.n_loops = 0  # loop statements the iteration entered (each takes a loop id)
        # the calls (positions) of this iteration whose results still wait for their destination at its end: the
        # next iteration's first read of the tile records them (an ordered loop's program, build)
        self.pending_end: list[int] = []

    def fail(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def call(self, fn: Callable, dst: Any, args: tuple, kw: dict, out: Any) -> None:
        """The adapter boundary: ``fn(ctx, dst, *args, **kw)`` returned ``out`` (the new tile for ``PENDING``)."""
        if self.reason is not None:
            return
        if len(self.calls) >= MAX_BODY_CALLS:
            self.fail(
                f"a body of more than {MAX_BODY_CALLS} instructions (recording it costs more than a program saves)"
            )
            return
        name = getattr(fn, "__name__", "")
        if name not in _OPS:
            self.fail(f"a call of {name} (the programs run {', '.join(sorted(_OPS))})")
            return
        bound = _bind(fn, args, kw)
        if bound is None:
            self.fail(f"{name} with arguments it does not take")
            return
        tensors = [out if dst is PENDING else dst]
        params: list[tuple[str, Any]] = []
        for k, v in bound.items():
            if isinstance(v, Tensor):
                params.append((k, Ref(len(tensors))))
                tensors.append(v)
            elif k in _VALUE_KWARGS and v is not None and not (v.__class__ is tuple and not v):  # () : no PE tiling
                self.fail(f"{name} with {k}=")
                return
            elif v is None or v.__class__ in _PLAIN or isinstance(v, _VALUES) or _is_function(v):
                params.append((k, v))
            elif v.__class__ in (tuple, list) and all(x.__class__ in _PLAIN for x in v):
                params.append((k, tuple(v)))  # axis=(1, 3) / [1, 3]
            else:
                self.fail(f"{name} with {k}= of type {type(v).__name__}")
                return
        views = []
        for t in tensors:
            if not isinstance(t, Tensor):
                self.fail(f"{name} without a tile destination")
                return
            d = self._view(t)
            if isinstance(d, str):
                self.fail(f"{name}: {d}")
                return
            views.append(d)
        self.calls.append(Call(name, tuple(params), tuple(views), self.ctx.site[1]))

    def landed(self, result: Tensor, dst: Tensor, how: str, mask: Any) -> None:
        """``dst[...] = result``: the pending result of an earlier call lands in ``dst`` (ops.land_pending)."""
        if self.reason is not None:
            return
        pos = next(
            (i for i in range(len(self.calls) - 1, -1, -1) if self.calls[i].views[0][0] == result.alloc.id), None
        )
        if pos is None or pos in self.landings or mask is not None or how not in _LANDINGS:
            self.fail("a result assigned with a mask, a broadcast or twice")
            return
        d = self._view(dst)
        if isinstance(d, str):
            self.fail(f"{'a `+=` onto' if how == 'accumulate' else 'an assignment to'} {d}")
            return
        self.landings[pos] = (d, how)

    def filled(self, t: Tensor, api: str) -> None:
        """``nl.zeros`` / ``ones`` / ``full`` allocated ``t`` and filled it (vector.fill records the memset): the
        step writes the storage as filled (exact by construction)."""
        if self.reason is not None:
            return
        d = self._view(t)
        if isinstance(d, str):
            self.fail(f"{api}: {d}")
            return
        self.calls.append(Call("fill", (("storage", t.alloc.array.copy()),), (d,), self.ctx.site[1]))

    def inner_loop(self, n: int, shuffled: bool) -> bool:
        """A loop statement in the body: True to trace through it (its iterations are part of the body's), else
        the body is not a program (a loop of more iterations than this one gains more as a program of its own: a
        program runs all but two iterations at once)."""
        if shuffled:
            self.fail("a loop in the body with shuffled iterations (SimOptions.shuffle_affine_seed)")
        elif n > self.n:
            self.fail(f"a loop of {n} iterations in the body (it may run as a program of its own)")
        return self.reason is None

    def _view(self, t: Tensor) -> tuple | str:
        """``t``'s view description (or why it has none), noting its allocation: the body's (weakly: the shape and
        dtype of its storage) or one from before the loop."""
        d = _describe(t)
        if isinstance(d, str):
            return d
        al = t.alloc
        if al.id > self.alloc0:
            root = _root(al.array)
            self.body[al.id - self.alloc0] = (weakref.ref(al), root.shape, root.dtype)
        else:
            self.pre[al.id] = weakref.ref(al)
        return d

    def index(self, n: int, start: int, stop: int) -> None:
        """The kernel indexed a dimension of size ``n`` with a loop index: elements [start, stop)."""
        self.slices.append((n, start, stop))

    def subscript(self, n: int, start: int, stop: int) -> None:
        """A subscript with ints (an unrolled loop's index is one) took elements [start, stop) of a dimension of size
        ``n``, as written: build checks them in bounds at the last iteration.  A negative bound counts from the end: its
        elements are noted with a mark, so that the two traced iterations differ when one counted from the end and
        the other did not (the program would not move linearly)."""
        if start < 0 or stop < 0:
            self.slices.append((1, 0, 0))
            start, stop = start + n if start < 0 else start, stop + n if stop < 0 else stop
        self.slices.append((n, start, stop))

    def begin(self) -> None:
        ctx = self.ctx
        self.alloc0 = ctx.alloc_count
        self.seq0 = len(ctx.trace.events)
        self.n_instr = ctx.n_instructions
        self.loops0 = ctx.loop_count

    def end(self) -> None:
        ctx = self.ctx
        self.n_loops = ctx.loop_count - self.loops0
        self.alloc1 = ctx.alloc_count
        self.seq1 = len(ctx.trace.events)
        self.n_instr = ctx.n_instructions - self.n_instr
        self.scans = {}
        for a, ref in self.pre.items():
            al = ref()
            if al is not None and al.unwritten:
                self.scans[a] = al.poison_scans
        if ctx.pending:
            calls = {c.views[0][0]: j for j, c in enumerate(self.calls)}
            for res in ctx.pending:
                a = res.tile.alloc.id if res.tile is not None else 0
                j = calls.get(a) if a > self.alloc0 else None
                if j is None:
                    self.fail("a result from before the iteration still waits for its destination at its end")
                    return
                self.pending_end.append(j)


def context_reason(ctx: RunContext) -> str | None:
    """Why no loop of this run can be a program (the run's own state), or None."""
    if math.prod(ctx.grid) > 1:  # (an NKI 0.7 kernel runs on a grid of one core without kernel[n])
        return "an SPMD launch (instances' HBM writes are checked against each other per write)"
    if ctx.call_hook is not None:
        return "a launch whose cores take turns per call"
    direct = ctx.direct
    if direct is not None and getattr(direct, "active", False):
        return "direct allocation (placement and modulo addressing per iteration)"
    if ctx.memory.blocks:
        return "block-dimension tiles (liveness per block)"
    if not ctx.options.trace:
        return "a run without a trace"
    return None


# ---- building the program ------------------------------------------------------------------------------------


def _event_template(
    e0: Event | None, e1: Event | None, r0: Recorder, r1: Recorder, ordered: bool = False
) -> tuple | str:
    """How iteration k's event follows from iteration 1's: (the event of iteration 1, per region of its reads and
    writes the (alloc-id step, byte step) per iteration), or why it does not.  ``ordered``: a read of a tile the
    previous iteration made (iteration 0: one from before the loop) moves with the body's tiles."""
    if e0 is None or e1 is None:
        return "an event recorded out of order"
    if e0[1:12] != e1[1:12] or e0.payload != e1.payload or e0[15:18] != e1[15:18] or e0.engine_given != e1.engine_given:
        return f"the {e0.op} at line {e0.line} differs between iterations beyond its addresses"
    l0, l1 = e0.loops, e1.loops
    d = r1.depth
    if len(l0) != len(l1) or len(l0) < d or l0[:d] != l1[:d]:
        return "an event in a different loop"
    if r1.frame and (len(l0) == d or l0[d][:2] != l1[d][:2] or l0[d][3:] != l1[d][3:]):
        return "an event in a different loop"
    inner = d + 1 if r1.frame else d
    for f0, f1 in zip(l0[inner:], l1[inner:], strict=True):  # loops in the body: a new loop id per entry
        if f0[0] != f1[0] or f0[2:] != f1[2:] or f1[1] - f0[1] != r1.n_loops:
            return "an event in a different loop in the body"
    if len(e0.reads) != len(e1.reads) or len(e0.writes) != len(e1.writes):
        return "an event with a different number of operands"
    per = r1.alloc1 - r1.alloc0
    shifts = []
    for a, b in zip(e0.reads + e0.writes, e1.reads + e1.writes, strict=True):
        if a.buffer != b.buffer:
            return "an event touches different buffers in different iterations"
        if r0.alloc0 < a.alloc_id <= r0.alloc1:
            if a.alloc_id - r0.alloc0 != b.alloc_id - r1.alloc0 or a.lo != b.lo or a.hi != b.hi:
                return "an event touches a different body tile in the next iteration"
            shifts.append((per, 0))
        elif ordered and r0.alloc0 < b.alloc_id <= r0.alloc1 and a.alloc_id <= r0.alloc0 and a.hi - a.lo == b.hi - b.lo:
            shifts.append((per, 0))  # a carried tile (View.lag): iteration k reads iteration k - 1's
        elif a.alloc_id == b.alloc_id and a.hi - a.lo == b.hi - b.lo:
            shifts.append((0, b.lo - a.lo))
        else:
            return "an event touches a different tensor in the next iteration"
    return (e1, tuple(shifts))


def _view(d0: tuple, d1: tuple, r0: Recorder, r1: Recorder, n: int, ordered: bool = False) -> View | str:
    """The view of an operand from its descriptions in iterations 0 and 1, or why there is none.  ``ordered``: a
    tile iteration 0 made may be what iteration 1 reads in place of one from before the loop (a carried tile)."""
    a0, off0, shape, strides, sd, _, key0 = d0
    a1, off1, shape1, strides1, sd1, _, key1 = d1
    if shape != shape1 or strides != strides1 or sd != sd1 or (key0 is None) != (key1 is None):
        return "an operand of another shape or layout in the next iteration"
    body = a0 > r0.alloc0
    if not body and r0.alloc0 < a1 <= r0.alloc1:  # iteration 1 reads a tile iteration 0 made
        if not ordered or key1 is not None or a1 - r0.alloc0 not in r1.body:
            return "an operand that is a tile of the previous iteration (a loop-carried tile)"
        return View(True, a1 - r0.alloc0, off1, 0, shape, strides, sd, None, 1)
    if body and (a1 - r1.alloc0 != a0 - r0.alloc0 or off0 != off1):
        return "an operand that is a different body tile in the next iteration"
    if not body and a0 != a1:
        return "an operand that is another tensor in the next iteration"
    alloc = a0 - r0.alloc0 if body else a0
    if key0 is None:
        return View(body, alloc, off0, off1 - off0, shape, strides, sd)
    # an index-array view: per axis of its parent, the index moves by a constant per iteration and stays inside the
    # axis up to the last iteration (the bounds check of Tensor._resolve, at the ends of an affine range)
    (dims, pstrides), isz = strides, sd.itemsize
    if off0 != off1 or len(key0) != len(key1) != len(dims):
        return "an index-array operand whose parent view moves"
    items = np.full(shape, off0 // isz, dtype=np.int64)
    step = 0
    for k0, k1, size, st in zip(key0, key1, dims, pstrides, strict=True):
        d = np.asarray(k1) - np.asarray(k0)
        if d.size == 0:
            continue
        delta = int(d.flat[0])
        if (d != delta).any():
            return "an index array that does not move by a constant per iteration"
        lo, hi = int(np.min(k0)), int(np.max(k0))
        last = n - 1
        if min(lo, lo + last * delta) < 0 or max(hi, hi + last * delta) >= size:
            return f"an index outside its dimension in iteration {last} (the per-iteration path reports it)"
        items = items + np.broadcast_to(np.asarray(k0, dtype=np.int64), shape) * (st // isz)
        step += delta * st
    return View(body, alloc, off0, step, shape, (), sd, items)


def _elements(v: View) -> np.ndarray:
    """Item offsets of a view's elements in its allocation's storage (iteration 0), flattened."""
    if v.items is not None:
        return v.items.ravel()
    isz = v.sdtype.itemsize
    idx = np.array(v.offset // isz, dtype=np.int64)
    for n, s in zip(v.shape, v.strides, strict=True):
        idx = np.add.outer(idx, np.arange(n, dtype=np.int64) * (s // isz))
    return idx.ravel()


def _checks(steps: list[Step], pre: dict[int, Alloc], body: dict[int, tuple], n: int) -> str | None:
    """What the per-iteration path checks that holds for every iteration or for none, in either executor: the body
    reads only what it wrote earlier in the same iteration (a tile of the previous iteration, ``View.lag``: only what
    the body writes of it), the kernel reads no element of a tensor from before the loop that may hold poison, and
    no on-chip view moves across partitions.  Returns why not, or None."""
    written = {i: np.zeros(math.prod(s), dtype=bool) for i, (_, s, _) in body.items()}
    lagged = []
    for s in steps:
        for v in (*s.srcs, *_accumulator(s)):
            if v.lag:
                lagged.append((v, s.line))
            elif v.body and not _written(written[v.alloc], v).all():
                return f"a body tile read before the body writes it (line {s.line})"
        for w in _writes(s):
            if w.body:
                if w.items is not None:
                    written[w.alloc][_elements(w)] = True
                else:
                    _written(written[w.alloc], w)[...] = True
    for v, line in lagged:  # what the previous iteration wrote of its tile
        if not _written(written[v.alloc], v).all():
            return f"a read of a tile of the previous iteration that it did not write everywhere (line {line})"
    # `psum += r` onto a PSUM tile from before the loop is a reduction over the iterations: not a write that makes
    # the tensor's values differ from one iteration's reads to the next's (build checks its written state)
    wrote = {
        w.alloc for s in steps for w in _writes(s) if not w.body and not (_accumulator(s) and w is _accumulator(s)[0])
    }
    for s in steps:
        for v in (*s.srcs, *_accumulator(s)):
            if v.body:
                continue
            pal = pre[v.alloc]
            # a tensor that may hold poison: the reads of the iterations the program runs must find none (the
            # per-iteration path would warn at the first); the loop must not write it (its clean reads are counted:
            # Program.run); index-array views are not checked here
            if pal.unwritten and (
                v.alloc in wrote or v.items is not None or _holds_poison(_batched(_root(pal.array), v, 2, n))
            ):
                return f"a read of a tensor that may hold never-written elements (line {s.line}; checked per read)"
    for s in steps:
        for v in _views(s):
            al = None if v.body else pre[v.alloc]
            if al is not None and al.buffer.on_chip and abs(v.step) >= _root(al.array).strides[0]:
                # the partition access rules (start partition, E026) are per view: the traced iterations saw two
                return f"an on-chip view that moves across partitions (line {s.line})"
    return None


def _written(flat: np.ndarray, v: View) -> np.ndarray:
    """A basic view's elements in the flags ``flat`` of its allocation's storage (a strided view of it); an
    index-array view's, a copy."""
    if v.items is not None:
        return flat[_elements(v)]
    isz = v.sdtype.itemsize
    return np.ndarray(v.shape, bool, buffer=flat, offset=v.offset // isz, strides=tuple(st // isz for st in v.strides))


def _disjoint(steps: list[Step], pre: dict[int, Alloc], n: int, ordered: bool) -> str | set[int]:
    """Whether running each step over all iterations at once computes what the iterations in order compute (with
    :func:`_checks`): no iteration reads or writes an element of a tensor from before the loop that another
    iteration writes (exact, per element, over all ``n`` iterations).  Returns why not, or the SBUF tensors from
    before the loop that an ``ordered`` loop (sequential_range, a kernel's range) uses as scratch: every iteration
    writes and reads the same elements of it, each read after the same iteration's write -- a buffer reused per
    iteration, which the executor gives each iteration a copy of (the last one's stays)."""
    if any(v.lag for s in steps for v in s.srcs):
        return "a tile of the previous iteration read"
    scratch = set()
    written: dict[int, np.ndarray] = {}
    if ordered:  # candidates: SBUF tensors the body writes whose every view is the same in every iteration
        wrote_pre = {w.alloc for s in steps for w in _writes(s) if not w.body}
        moving = {v.alloc for s in steps for v in _views(s) if not v.body and (v.step or v.items is not None)}
        scratch = {a for a in wrote_pre - moving if pre[a].buffer is Buffer.SBUF}
        written = {a: np.zeros(_root(pre[a].array).size, dtype=bool) for a in scratch}
    for s in steps:
        for v in (*s.srcs, *_accumulator(s)):
            if not v.body and v.alloc in scratch and not _written(written[v.alloc], v).all():
                scratch.discard(v.alloc)  # it carries values from one iteration to the next
        for w in _writes(s):
            if not w.body and w.alloc in scratch:
                if w.items is not None:
                    written[w.alloc][_elements(w)] = True
                else:
                    _written(written[w.alloc], w)[...] = True
    # `psum += r` onto a PSUM tile from before the loop is a reduction over the iterations (exempt from the race
    # check as on the per-iteration path; the executor adds in iteration order): not an ownership write
    writes = [
        (w, s.line)
        for s in steps
        for w in _writes(s)
        if not w.body and w.alloc not in scratch and not (_accumulator(s) and w is _accumulator(s)[0])
    ]
    wrote = {v.alloc for v, _ in writes}
    reads = [(v, s.line) for s in steps for v in (*s.srcs, *_accumulator(s)) if not v.body]
    owner = {a: np.full(_root(pre[a].array).size, -1, dtype=np.int32) for a in wrote}
    for accesses, is_write in ((writes, True), (reads, False)):
        for v, line in accesses:
            if v.alloc not in owner:
                continue
            own = owner[v.alloc]
            isz = v.sdtype.itemsize
            el = _elements(v) if v.items is not None else None
            chunk = max(1, (4 << 20) // max(1, _size(v)))
            for k0 in range(0, n, chunk):
                k1 = min(n, k0 + chunk)
                if el is None:  # a basic view: the owners of its elements in iterations k0..k1-1, as a strided view
                    kk = np.arange(k0, k1, dtype=np.int32).reshape((-1,) + (1,) * len(v.shape))
                    cur = np.ndarray(
                        (k1 - k0,) + v.shape,
                        np.int32,
                        buffer=own,
                        offset=(v.offset + k0 * v.step) // isz * 4,
                        strides=(v.step // isz * 4,) + tuple(st // isz * 4 for st in v.strides),
                    )
                else:
                    ks = np.arange(k0, k1, dtype=np.int64)
                    idx = (ks * (v.step // isz))[:, None] + el[None, :]
                    kk = ks[:, None].astype(np.int32)
                    cur = own[idx]
                if not ((cur == -1) | (cur == kk)).all():
                    return f"iterations touch the same elements (line {line}; the per-iteration path checks the race)"
                if is_write:
                    if el is None:
                        cur[...] = kk
                        written_by = cur
                    else:
                        own[idx] = kk
                        written_by = own[idx]
                    if not (written_by == kk).all():
                        return f"iterations write the same elements (line {line}; the per-iteration path checks it)"
    return scratch


def _batched(base: np.ndarray, v: View, k0: int, k1: int) -> np.ndarray:
    """The view ``v`` of a tensor from before the loop in iterations k0..k1-1, one array with a leading iteration
    axis (NumPy checks that it stays inside ``base``)."""
    return np.ndarray(
        (k1 - k0,) + v.shape, v.sdtype, buffer=base, offset=v.offset + k0 * v.step, strides=(v.step,) + v.strides
    )


class Program:
    """The body of one loop entry as steps over views, and the events of each of its iterations."""

    def __init__(
        self,
        ctx: RunContext,
        steps: list[Step],
        templates: list[tuple],
        n: int,
        r1: Recorder,
        pre: dict[int, Alloc],
        body: dict[int, tuple[weakref.ref, tuple, np.dtype]],
        sequential: bool = False,
    ):
        self.ctx = ctx
        self.pre = pre  # the tensors from before the loop the body uses, by id
        # the iterations depend on each other (an ordered loop): run one at a time, in order, each step on that
        # iteration's views; else every step runs over all iterations at once
        self.sequential = sequential
        self.prev: dict[int, np.ndarray] = {}  # (sequential) the previous iteration's body tiles, for View.lag reads
        self.sets: list[dict[int, np.ndarray]] = []  # (sequential) the body tiles of even and odd iterations
        # (sequential) each view's array, by (id of the View, iteration parity): a body tile's in its set, a view of a
        # tensor from before the loop (a moving one over all iterations, sliced per iteration) -- made once
        self.views: dict[int, tuple[np.ndarray, int]] = {}
        self.steps = steps
        self.templates = templates
        self.n = self.stop = n  # the program runs iterations up to ``stop`` (the loop's trip count, or the cap's)
        self.r1 = r1
        self.body = body  # position -> (the body tile of iteration 1, the shape and dtype of its storage)
        # the body tiles a step reads (an operand, or the accumulator of `psum += r`); run() adds those the kernel
        # still holds: the others (a matmul's result consumed by `+=`) are not kept
        self.read = {v.alloc for s in steps for v in (*s.srcs, *_accumulator(s)) if v.body}
        self.lagged = {v.alloc for s in steps for v in s.srcs if v.lag}
        self.live: set[int] = set()
        self.scans: dict[int, int] = {}  # tensor that may hold poison -> its clean reads per iteration (build)
        # body tiles one loop-invariant step writes and nothing else does: the same in every iteration, kept once
        # (their storage has one iteration, read with an iteration stride of 0)
        writers: dict[int, int] = {}
        for s in steps:
            for w in _writes(s):
                if w.body:
                    writers[w.alloc] = writers.get(w.alloc, 0) + 1
        self.single = {
            s.dst.alloc
            for s in steps
            if _invariant(s) and s.dst.body and s.dst.alloc > 0 and s.landing is None and writers[s.dst.alloc] == 1
        }
        # steps whose operands are the same in every iteration (views from before the loop that do not move; the loop
        # writes none of their elements: _disjoint) give the same value in each: computed once, broadcast
        self.invariant = [_invariant(s) and not sequential for s in steps]
        if sequential:  # a tensor from before the loop may change from one iteration to the next: nothing is invariant
            self.single = set()

    # -- the executor ------------------------------------------------------------------------------------------
    def run(self, k0: int) -> None:
        """Run iterations k0..n-1: values, events, allocation ids, instruction count."""
        ctx = self.ctx
        n = self.n
        self.live = self.read | {i for i, (ref, _, _) in self.body.items() if ref() is not None}
        per_iter = sum(math.prod(s) * d.itemsize for i, (_, s, d) in self.body.items() if i in self.live) + sum(
            math.prod(s.dst.shape) * 8 for s in self.steps
        )
        if self.sequential:
            # two sets of body tiles, iteration k's in set k % 2: iteration k reads iteration k - 1's (View.lag) in the
            # other set; iteration 2 reads iteration 1's own, copied in
            self.sets = [
                {i: np.empty((1,) + s, d) for i, (_, s, d) in self.body.items() if i in self.live} for _ in "01"
            ]
            for i in self.lagged:
                self.sets[1][i][0] = _root(self.body[i][0]().array)  # type: ignore[union-attr]  # (build: alive)
            self.views.clear()
            for k in range(k0, n):
                self.prev = self.sets[(k - 1) & 1]
                self._values(k, k + 1)
            last = self.sets[(n - 1) & 1]
        else:
            chunk = max(1, CHUNK_BYTES // max(1, per_iter))
            for c0 in range(k0, n, chunk):
                last = self._values(c0, min(n, c0 + chunk))
        for i, (ref, _, _) in self.body.items():
            al = ref()
            if al is not None:  # a body tile the kernel still holds after the loop: the last iteration's values
                _root(al.array)[...] = last[i][-1]
                if i > 0:  # (not a scratch copy) and the last iteration's tile: its id, its loops
                    self._renumber(al, n - 2)
        with no_gc():
            self._events(k0)
        self._note_writes(k0)
        r1 = self.r1
        per = r1.alloc1 - r1.alloc0
        trace = ctx.trace
        origins, names = trace.alloc_origins, trace.alloc_names
        for a in range(r1.alloc0 + 1, r1.alloc1 + 1):  # the body's allocation k is a + (k - 1) * per
            ids = range(a + (k0 - 1) * per, a + (n - 1) * per, per)
            o, nm = origins.get(a), names.get(a)
            if o is not None:
                origins.update(zip(ids, repeat(o)))
            if nm is not None:
                names.update(zip(ids, repeat(nm)))
        ctx.alloc_count += (n - k0) * per
        ctx.n_instructions += (n - k0) * r1.n_instr
        ctx.loop_count += (n - k0) * r1.n_loops  # the loop statements of the body: one id per entry
        for a, per_iteration in self.scans.items():
            _count_clean_reads(self.pre[a], per_iteration * (n - k0))

    def _note_writes(self, k0: int) -> None:
        """Inside an ``affine_range`` (the loop's enclosing loops): note each write of a tensor from before the loop in
        iterations k0..n-1 with the race log (E029, core/races.py), as ops.record does for each instruction, so that
        two iterations of that enclosing loop writing the same elements are found as without programs."""
        races, ctx = self.ctx.races, self.ctx
        if races is None or not any(fr.kind is LoopKind.AFFINE for fr in ctx.loops):
            return
        writes = []
        for j, s in enumerate(self.steps):
            for w in _writes(s):
                if w.body and w.alloc > 0:
                    continue  # a tile of the iteration's own (new each iteration)
                kind = 2 if s.landing is not None and w is s.landing[0] and s.landing[2] == "accumulate" else 0
                writes.append((j, w, self.pre[abs(w.alloc)], kind))
        if not writes:
            return
        events, first, per = ctx.trace.events, self.r1.seq0, self.r1.seq1 - self.r1.seq0
        for k in range(k0, self.n):
            for j, w, al, kind in writes:
                ev = events[first + (k - 1) * per + j]
                base = al.array
                off = w.offset + k * w.step
                arr = np.ndarray(w.shape, w.sdtype, buffer=_root(base), offset=off, strides=w.strides)
                start = off - (base.__array_interface__["data"][0] - _root(base).__array_interface__["data"][0])
                races.note(
                    ctx, Tensor(al, arr=arr, par=0, off=start), (), (ev.file, ev.line, ev.program_id, ev.loops), kind
                )

    def _renumber(self, al: Alloc, q: int) -> None:
        """Make iteration 1's body tile ``al`` iteration 1 + q's: the allocation id and the loops it was made in that
        iteration's (the per-iteration path would hold that iteration's tile)."""
        r1, d = self.r1, self.r1.depth
        self.ctx.memory.renumber(al, al.id + q * (r1.alloc1 - r1.alloc0))
        loops = al.born_loops
        if not r1.frame:
            inner = tuple(g._replace(loop_id=g.loop_id + q * r1.n_loops) for g in loops[d:])
            al.born_loops = (*loops[:d], *inner)
        elif len(loops) > d:
            f = loops[d]
            inner = tuple(g._replace(loop_id=g.loop_id + q * r1.n_loops) for g in loops[d + 1 :])
            al.born_loops = (*loops[:d], f._replace(iteration=f.iteration + q), *inner)

    def _array(self, v: View, k0: int, k1: int, storage: dict[int, np.ndarray]) -> np.ndarray:
        """The view ``v`` in iterations k0..k1-1 as one array with a leading iteration axis (a copy for an
        index-array view)."""
        if self.sequential and v.items is None:  # one iteration (k1 = k0 + 1): the view's array, made once
            key = id(v) * 2 + (k0 & 1)
            hit = self.views.get(key)
            if hit is None:
                if v.body or not v.step:
                    hit = self.views[key] = (self._view_array(v, k0, k0 + 1, storage), -1)
                else:
                    hit = self.views[key] = (self._view_array(v, k0, self.n, storage), k0)
            a, base = hit
            return a if base < 0 else a[k0 - base : k0 - base + 1]
        return self._view_array(v, k0, k1, storage)

    def _view_array(self, v: View, k0: int, k1: int, storage: dict[int, np.ndarray]) -> np.ndarray:
        if v.items is not None:
            flat, idx = self._gather(v, k0, k1, storage)
            return flat[idx].reshape((k1 - k0,) + v.shape)
        if v.body:
            root = self.prev[v.alloc] if v.lag else storage[v.alloc]
            step = root.strides[0] if root.shape[0] > 1 else 0  # 0: a tile kept once (Program.single)
            return np.ndarray((k1 - k0,) + v.shape, v.sdtype, buffer=root, offset=v.offset, strides=(step,) + v.strides)
        return _batched(_root(self.pre[v.alloc].array), v, k0, k1)

    def _gather(self, v: View, k0: int, k1: int, storage: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(the flat storage, the item index of each element in iterations k0..k1-1) of an index-array view."""
        assert v.items is not None
        items = v.items.reshape(1, -1)
        if v.body:
            root = storage[v.alloc]
            per = root[0].size if root.shape[0] > 1 else 0
            return root.reshape(-1), items + (np.arange(k1 - k0, dtype=np.int64) * per)[:, None]
        step = v.step // v.sdtype.itemsize
        flat = _root(self.pre[v.alloc].array).reshape(-1)
        return flat, items + (np.arange(k0, k1, dtype=np.int64) * step)[:, None]

    def _write(self, v: View, value: Any, dtype: Any, k0: int, k1: int, storage: dict[int, np.ndarray]) -> None:
        """Write ``value`` to view ``v`` in iterations k0..k1-1, rounded once to ``dtype`` (Tensor.write)."""
        if v.items is None:
            dt.cast_into(self._array(v, k0, k1, storage), value, dtype)
            return
        tmp = np.empty((k1 - k0,) + v.shape, v.sdtype)
        dt.cast_into(tmp, value, dtype)
        flat, idx = self._gather(v, k0, k1, storage)
        flat[idx] = tmp.reshape(idx.shape)

    def _values(self, k0: int, k1: int) -> dict[int, np.ndarray]:
        live = self.live
        deferred: list[tuple[View, np.ndarray]] = []  # products added to a PSUM tile from before the loop
        storage = (
            self.sets[k0 & 1]
            if self.sequential
            else {
                i: np.empty((1 if i in self.single else k1 - k0,) + s, d)
                for i, (_, s, d) in self.body.items()
                if i in live
            }
        )
        for i in storage:
            if i < 0:  # a scratch buffer: each iteration's copy starts as the buffer is before the loop
                storage[i][...] = _root(self.pre[-i].array)
        for s, invariant in zip(self.steps, self.invariant, strict=True):
            shape = (1 if invariant else k1 - k0,) + s.dst.shape
            srcs = [self._array(v, k0, k0 + shape[0], storage) for v in s.srcs]
            op = s.op
            kept = not s.dst.body or s.dst.alloc in live  # else a body tile nobody reads: not written
            v: Any
            acc = _accumulator(s)
            if op is Op.MATMUL and acc and not acc[0].body:  # onto a PSUM tile from before the loop: in order below
                products = self._matmul(srcs[0], srcs[1], shape)
                deferred.append((acc[0], np.broadcast_to(products, (k1 - k0,) + s.dst.shape)))
                if kept:
                    self._write(s.dst, deferred[-1][1], s.dtype, k0, k1, storage)
                continue
            if op is Op.MATMUL and not kept and acc and not invariant:  # `psum += nc_matmul(...)`: add each product
                self._matmul(srcs[0], srcs[1], shape, self._array(acc[0], k0, k1, storage))
                continue
            if op is Op.DMA:
                v = srcs[0]
                if v.shape != shape:
                    v = np.ascontiguousarray(v).reshape(shape)
            elif op is Op.DMA_TRANSPOSE:
                v = np.swapaxes(srcs[0], 1, 2)
            elif op is Op.TRANSPOSE:  # tensore.nc_transpose: fp32, zeros in a trace-only run as there
                a = srcs[0]
                if self.ctx.options.trace_only:
                    v = np.zeros(shape, np.float32)
                else:
                    v = np.swapaxes(a.astype(np.float32, copy=False).reshape(a.shape[0], a.shape[1], -1), 1, 2)
            elif op is Op.BROADCAST:  # vector.broadcast_to: fp32, padded with trailing 1s (ops.pa_pad)
                a = srcs[0].astype(np.float32, copy=False)
                v = np.broadcast_to(a.reshape(a.shape + (1,) * (len(shape) - a.ndim)), shape)
            elif op is Op.BINARY:  # vector.binary: partition-first broadcasting (ops.pa_pad), fp32
                fn, operands = s.func
                nd = len(s.dst.shape)
                args = []
                for kind, x in operands:
                    if kind == "tile":
                        a = srcs[x].astype(np.float32, copy=False)
                        x = a.reshape(a.shape + (1,) * (nd + 1 - a.ndim)) if a.ndim < nd + 1 else a
                    args.append(x)
                v = np.asarray(fn(*args))
                if v.shape != shape:
                    v = np.broadcast_to(v, shape)
                v = v.astype(np.float32, copy=False)
            elif op is Op.TENSOR_COPY:
                v = srcs[0] if s.func is None else srcs[0].astype(np.float32)
            elif op is Op.TENSOR_SCALAR:
                v = srcs[0].astype(np.float32, copy=False)
                for fn, ref, reverse in s.func:
                    o = srcs[ref].astype(np.float32, copy=False) if isinstance(ref, int) else np.float32(ref)
                    v = fn(o, v) if reverse else fn(v, o)
                v = np.asarray(v, dtype=np.float32)
            elif op is Op.FILL:
                if kept:
                    self._array(s.dst, k0, k1, storage)[...] = s.func  # the storage as the traced iteration filled it
                continue
            elif op is Op.MATMUL:
                v = self._matmul(srcs[0], srcs[1], shape)
            elif op is Op.TENSOR_REDUCE:
                name, axes, keepdims, negate = s.func
                v = reduce_values(name, srcs[0].astype(np.float32, copy=False), tuple(a + 1 for a in axes), keepdims)
                v = np.asarray(v, dtype=np.float32)
                if negate:
                    v = -v
            elif op is Op.ACTIVATION:  # vector._activation_core
                fn, scale, column, bias = s.func
                v = srcs[0].astype(np.float32, copy=False)
                if scale != 1.0:
                    v = v * np.float32(scale)
                if column is not None:
                    col = srcs[column].astype(np.float32, copy=False)
                    v = v + col.reshape(col.shape[:2] + (1,) * (v.ndim - 2))
                elif bias is not None and float(bias) != 0.0:
                    v = v + np.float32(bias)
                v = np.asarray(fn(v), dtype=np.float32)
            elif op is Op.UNARY:
                assert s.func is not None
                v = np.asarray(s.func(srcs[0].astype(np.float32, copy=False)), dtype=np.float32)
            else:
                assert s.func is not None
                v = s.func(srcs[0].astype(np.float32, copy=False), srcs[1].astype(np.float32, copy=False))
                v = np.asarray(v).astype(np.float32, copy=False)
            if kept and s.dst.body and s.dst.alloc in self.single:
                self._write(s.dst, v, s.dtype, k0, k0 + 1, storage)  # once: every iteration reads this copy
                kept = False
            if invariant:
                shape = (k1 - k0,) + s.dst.shape
                v = np.broadcast_to(v, shape)
            if kept:
                self._write(s.dst, v, s.dtype, k0, k1, storage)
            if s.landing is not None:  # `t[...] = r`: the exact result lands in t too, rounded once to its dtype
                lv, ldtype, how = s.landing
                if how == "accumulate":  # `psum += r` onto fp32 PSUM written everywhere: Tensor.accumulate's add
                    into = self._array(lv, k0, k1, storage)
                    np.add(into, v, out=into)
                    continue
                if how == "reshape":
                    v = np.ascontiguousarray(np.broadcast_to(v, shape)).reshape((k1 - k0,) + lv.shape)
                self._write(lv, v, ldtype, k0, k1, storage)
        for i in range(k1 - k0):  # iteration by iteration, in program order: the per-iteration path's fp32 sums
            for lv, products in deferred:
                acc = self._array(lv, k0 + i, k0 + i + 1, storage)[0]
                np.add(acc, products[i], out=acc)
        return storage

    def _matmul(self, a: np.ndarray, b: np.ndarray, shape: tuple, acc: np.ndarray | None = None) -> np.ndarray:
        """nc_matmul in iterations k0..k1-1 (``a``, ``b``: stationary and moving with a leading iteration axis):
        tensore.gemm_t per iteration on the views the instruction reads, as tensore._matmul calls it (so the
        products are the same bit for bit), zeros in a trace-only run as there; with ``acc`` each product is
        added to it (Tensor.accumulate) instead of kept."""
        trace_only = self.ctx.options.trace_only
        out = np.zeros(shape, dtype=np.float32) if acc is None else acc
        K, M = a.shape[1], math.prod(a.shape[2:])
        for i in range(shape[0]):
            if trace_only:
                if acc is not None:
                    np.add(acc[i], np.float32(0), out=acc[i])
                continue
            r = gemm_t(
                a[i].astype(np.float32, copy=False).reshape(K, M), b[i].astype(np.float32, copy=False), shape[1:]
            )
            if acc is None:
                out[i] = r
            else:
                np.add(acc[i], r, out=acc[i])
        return out

    def _events(self, k0: int) -> None:
        """Append the events of iterations k0..n-1, built field by field in C: each field of a template's events is
        a constant repeated or a range over the iterations, zipped into Region / Event tuples (1M events: about a
        second, against about 5 s one tuple at a time)."""
        n, r1 = self.n, self.r1
        L = r1.seq1 - r1.seq0
        first = self.templates[0][0]
        d, per_loops = r1.depth, r1.n_loops
        outer = first.loops[:d]
        if r1.frame:
            f = first.loops[d]
            loops = [outer + (_new(LoopFrame, (f[0], f[1], k, f[3], f[4], f[5])),) for k in range(k0, n)]
        else:  # a Python `range` of an NKI 0.7 kernel: no frame of its own
            loops = [outer] * (n - k0)
        inner_at = d + 1 if r1.frame else d
        m = n - k0

        def column(base: int, step: int) -> Iterator[int]:
            """The field of iterations k0..n-1: iteration k's is (k - 1) steps from iteration 1's ``base``."""
            return iter(range(base + (k0 - 1) * step, base + (n - 1) * step, step)) if step else repeat(base, m)

        memo: dict[tuple, list] = {}

        def frames(inner: tuple) -> list:
            """The loops of an event in loops of the body (``inner``: iteration 1's frames of them), per iteration:
            each entry into a loop statement takes the next loop id (built in C, once per distinct ``inner``)."""
            hit = memo.get(inner)
            if hit is None:
                cols = [
                    list(map(_frame, zip(repeat(g[0]), column(g[1], per_loops), *(repeat(x) for x in g[2:]))))
                    for g in inner
                ]
                hit = memo[inner] = list(map(tuple.__add__, loops, zip(*cols, strict=True)))
            return hit

        streams = []
        for e1, shifts in self.templates:
            regions = []
            for r, (da, db) in zip(e1.reads + e1.writes, shifts, strict=True):
                cols = (column(r[0], da), repeat(r[1], m), column(r[2], db), column(r[3], db))
                regions.append(map(_region, zip(*cols, strict=True)))
            nr = len(e1.reads)
            reads = zip(*regions[:nr], strict=True) if nr else repeat((), m)
            writes = zip(*regions[nr:], strict=True) if len(regions) > nr else repeat((), m)
            fields = (
                column(e1.seq, L),
                *(repeat(x, m) for x in e1[1:12]),
                reads,
                writes,
                *(repeat(x, m) for x in e1[14:18]),
                iter(frames(e1.loops[inner_at:]) if len(e1.loops) > inner_at else loops),
                repeat(e1[19], m),
            )
            streams.append(map(_event, zip(*fields, strict=True)))
        self.ctx.trace.events.extend(chain.from_iterable(zip(*streams, strict=True)))


def build(ctx: RunContext, r0: Recorder, r1: Recorder, n: int, ordered: bool = False) -> Program | str:
    """The program of a loop body from its first two iterations (``r0``, ``r1``), or why there is none.
    ``ordered``: the iterations run in order (not an affine_range), so a buffer from before the loop may be reused
    by every iteration (see _disjoint), and where the iterations depend on each other (a tile carried from one to
    the next, a tensor from before the loop that each iteration updates) the program runs them one by one, in
    order (``Program.sequential``)."""
    for r in (r0, r1):
        if r.reason is not None:
            return r.reason
    if r1.pending_end and not ordered:
        return "a result still waits for its destination at the end of the body"
    if r0.pending_end != r1.pending_end:
        return "the iterations left different results waiting for their destination"
    if not r1.calls:
        return "a body without instructions"
    if len(r0.calls) != len(r1.calls) or len(r0.slices) != len(r1.slices):
        return "the iterations made different NKI calls"
    if r1.alloc1 - r1.alloc0 != r0.alloc1 - r0.alloc0:
        return "the iterations allocated differently"
    if r1.n_loops != r0.n_loops:
        return "the iterations entered different loops"
    # (iteration 0 may also record a result from before the loop that waited for its destination: its event fills
    # the place reserved for it before the loop)
    if r1.seq0 != r0.seq1 or r1.seq1 - r1.seq0 != r1.n_instr:
        return "instructions recorded outside the iterations"
    if r0.seq1 - r0.seq0 != len(r0.calls) or r1.n_instr != len(r1.calls):
        return "an instruction that is not a call the program runs (an assignment, a `+=`, a fill)"
    # the iterations that fit under the instruction cap run as a program; the per-iteration path runs the rest and
    # stops at the exact instruction (E031)
    stop = min(n, 2 + (ctx.options.max_instructions - ctx.n_instructions) // max(1, r1.n_instr))
    if stop <= 2:
        return "the instruction cap (the per-iteration path stops at the exact instruction)"
    if r1.pending_end:
        # the last iteration's result waits for its destination after the loop (a landing there is not a copy): that
        # iteration runs per iteration
        stop = min(stop, n - 1)
        if stop <= 2:
            return "a result waits for its destination at the end of the body and the loop is short"
    pre: dict[int, Alloc] = {}  # the tensors from before the loop the body uses, by id
    for a, ref in r1.pre.items():
        if a > r0.alloc0:  # a tile iteration 0 made that iteration 1 read (View.lag)
            continue
        pal = ref()
        if pal is None:
            return "a tensor from before the loop that the kernel drops in the loop"
        pre[a] = pal
    if any(ref() is not None for ref, _, _ in r0.body.values()):
        _resync_locals()
    for ref, _, _ in r0.body.values():
        if ref() is not None:
            return "a tile of iteration 0 is still referenced (Python state carries tiles across iterations)"
    last = n - 1  # slices taken with the loop index stay in bounds up to the last iteration (affine: the extremes)
    for (m0, s0, e0), (m1, s1, e1) in zip(r0.slices, r1.slices, strict=True):
        lo, hi = s0 + last * (s1 - s0), e0 + last * (e1 - e0)
        if m0 != m1 or lo < 0 or hi > m0 or hi < lo:
            return f"an index outside its dimension in iteration {last} (the per-iteration path reports it)"
    if r0.landings.keys() != r1.landings.keys():
        return "the iterations assigned results differently"
    body: dict[int, tuple[weakref.ref, tuple, np.dtype]] = {}
    steps = []
    for j, (c0, c1) in enumerate(zip(r0.calls, r1.calls, strict=True)):
        if c0.name != c1.name or len(c0.views) != len(c1.views) or not _same_params(c0.params, c1.params):
            return f"the {c0.name} at line {c0.line} is a different call in the next iteration"
        views: list[View] = []
        for d0, d1 in zip(c0.views, c1.views, strict=True):
            v = _view(d0, d1, r0, r1, n, ordered)
            if isinstance(v, str):
                return f"{c0.name} at line {c0.line}: {v}"
            if v.lag and not views:
                return f"the {c0.name} at line {c0.line} writes a tile of the previous iteration"
            if v.body:
                body[v.alloc] = r1.body[v.alloc]
            views.append(v)
        step = _step(c0, views)
        if isinstance(step, str):
            return step
        if j in r0.landings:
            (d0, how0), (d1, how1) = r0.landings[j], r1.landings[j]
            lv = _view(d0, d1, r0, r1, n)
            if isinstance(lv, str):
                return f"the assignment of the {c0.name} at line {c0.line}: {lv}"
            if how1 == "first +=" or how0 == "first +=" and (lv.body or how1 != "accumulate"):
                # iteration 1's `+=` adds in place for every later iteration; only a PSUM tile from before the loop
                # may have been overwritten by iteration 0's first `+=`
                return f"a `+=` at line {c0.line} onto PSUM that is not written everywhere before it"
            if how0 != how1 and how0 != "first +=":
                return f"the assignment of the {c0.name} at line {c0.line}: {how0}"
            if lv.body:
                body[lv.alloc] = r1.body[lv.alloc]
            if (how1 == "accumulate") != (step.op is Op.MATMUL):
                return f"the {c0.name} at line {c0.line} accumulated with `+=`"
            step = step._replace(landing=(lv, d0[5], how1))
        steps.append(step)
    for s in steps:  # a PSUM tile from before the loop: only a `+=` accumulator, in one written state it keeps
        acc = _accumulator(s)
        for v in _views(s):
            if v.body or pre[v.alloc].buffer is not Buffer.PSUM:
                continue
            al = pre[v.alloc]
            if not (acc and v is acc[0]) or any(not w.body and w.alloc == v.alloc for w in s.srcs):
                return f"a PSUM tile from before the loop used other than as a `+=` accumulator (line {s.line})"
            if al.psum_kind is not None or al.psum_fill != BY_TENSOR_ENGINE:
                return f"a PSUM accumulator from before the loop not written everywhere by matmuls (line {s.line})"
    for s in steps:  # every view of a tensor from before the loop stays inside its storage
        for v in _views(s):
            if v.body:
                continue
            root = _root(pre[v.alloc].array)
            if v.items is not None:
                lo, hi = int(v.items.min()), int(v.items.max())
                last = (n - 1) * (v.step // v.sdtype.itemsize)
                if min(lo, lo + last) < 0 or max(hi, hi + last) >= root.size:
                    return f"a view outside its tensor's storage by the last iteration (line {s.line})"
                continue
            try:
                _batched(root, v, 0, n)
            except (ValueError, TypeError):
                return f"a view outside its tensor's storage by the last iteration (line {s.line})"
    why = _checks(steps, pre, body, n)
    if why is not None:
        return why
    scans = {}
    for a, s1 in r1.scans.items():  # the clean reads of a tensor that may hold poison, per iteration
        before = r0.scans.get(a)
        if before is None or s1 < before:
            return "a read of a tensor that may hold never-written elements (the poison check is per read)"
        scans[a] = s1 - before
    disjoint = _disjoint(steps, pre, n, ordered)
    if isinstance(disjoint, str) and not ordered:
        return disjoint
    sequential = isinstance(disjoint, str) or bool(r1.pending_end)
    if isinstance(disjoint, set) and disjoint and not sequential:
        # scratch buffers: views of a per-iteration copy, as of a body tile (key -alloc id)
        for a in disjoint:
            root = _root(pre[a].array)
            body[-a] = (weakref.ref(pre[a]), root.shape, root.dtype)
        steps = [_as_body(s, disjoint) for s in steps]
    if ctx.races is not None and any(fr.kind is LoopKind.AFFINE for fr in ctx.loops):
        for s in steps:
            if any(w.items is not None and (not w.body or w.alloc < 0) for w in _writes(s)):
                return f"an index-array write inside an affine_range (its races are noted per write; line {s.line})"
    for ref, _, _ in (body[v.alloc] for s in steps for v in s.srcs if v.lag):
        if ref() is None:
            return "a tile of the previous iteration read that the kernel no longer holds"
    if r1.pending_end:
        # iteration 2's first read of the tile would record it (iteration 1 did so with iteration 0's: Recorder.end)
        ctx.commit_pending()
    events = ctx.trace.events
    templates = []
    for j in range(r1.n_instr):
        t = _event_template(events[r0.seq0 + j], events[r1.seq0 + j], r0, r1, ordered)
        if isinstance(t, str):
            return t
        templates.append(t)
    for r in (r0, r1):  # each call's event writes the call's destination, or the tile its result landed in
        for j, c in enumerate(r.calls):
            writes = events[r.seq0 + j].writes
            target = r.landings[j][0][0] if j in r.landings else c.views[0][0]
            if len(writes) != 1 or writes[0].alloc_id != target:
                return f"the result of the {c.name} at line {c.line} lands elsewhere (`+=`, a copy)"
    program = Program(ctx, steps, templates, stop, r1, pre, body, sequential)
    program.scans = scans
    return program


def _resync_locals() -> None:
    """Re-read ``f_locals`` of the kernel's frames on the stack.  Up to Python 3.12 ``frame.f_locals`` is a snapshot
    kept on the frame until the next read; the loop-state check of a loop in the body (nki01/symbolic.py) takes one
    before the body rebinds its names, which would keep iteration 0's tiles alive.  Reading it again syncs it with
    the frame's variables (from 3.13 it is a live view: this is a no-op)."""
    f: types.FrameType | None = sys._getframe(1)
    while f is not None:
        if not f.f_code.co_filename.startswith(_SIM_DIR):
            f.f_locals  # noqa: B018  (the read is the point: it replaces the stale snapshot)
        f = f.f_back


def _holds_poison(a: np.ndarray) -> bool:
    pm = dt.poison_mask(a)
    return pm is not None and bool(pm.any())


def _count_clean_reads(al: Alloc, m: int) -> None:
    """``m`` more reads of ``al`` that find no poison, as Tensor._check_poison counts them: on the 1st, 2nd, 4th,
    8th, ... such read the whole allocation is checked, and once it holds no poison the reads stop checking."""
    s = al.poison_scans
    if m <= 0 or not al.unwritten:
        return
    p = 1 << s.bit_length()  # the first power of two above s
    if p <= s + m and dt.poison_mask(al.array) is not None and not _holds_poison(al.array):
        al.poison_scans, al.unwritten = p, False
    else:
        al.poison_scans = s + m


def _as_body(s: Step, scratch: set[int]) -> Step:
    """Step ``s`` with its views of the ``scratch`` tensors as views of per-iteration copies (body key -alloc)."""

    def view(v: View) -> View:
        return v._replace(body=True, alloc=-v.alloc) if not v.body and v.alloc in scratch else v

    landing = s.landing if s.landing is None else (view(s.landing[0]), *s.landing[1:])
    return s._replace(dst=view(s.dst), srcs=tuple(view(v) for v in s.srcs), landing=landing)


def _invariant(s: Step) -> bool:
    """Are step ``s``'s operands the same in every iteration (views from before the loop that do not move; the loop
    writes none of their elements, _disjoint), so that its value is too?"""
    return bool(s.srcs) and all(not v.body and not v.step and v.items is None for v in s.srcs)


def _accumulator(s: Step) -> tuple[View, ...]:
    """The PSUM view ``psum += r`` adds step ``s``'s result to, if it does."""
    return (s.landing[0],) if s.landing is not None and s.landing[2] == "accumulate" else ()


def _writes(s: Step) -> tuple[View, ...]:
    return (s.dst,) if s.landing is None else (s.dst, s.landing[0])


def _views(s: Step) -> tuple[View, ...]:
    return (*_writes(s), *s.srcs)


def _same_params(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for (ka, va), (kb, vb) in zip(a, b, strict=True):
        if ka != kb or va.__class__ is not vb.__class__:
            return False
        if isinstance(va, np.ndarray):  # a fill's storage
            if va.dtype != vb.dtype or va.shape != vb.shape or va.tobytes() != vb.tobytes():
                return False
        elif not (va is vb or va == vb):
            return False
    return True


def _op_name(op: Any, api: str) -> str | None:
    """The ALU op's name (ops.opcode), or None for anything opcode does not know."""
    try:
        return opcode(op, api)
    except Exception:
        return None


def _binary_name(op: Any, api: str) -> str | None:
    name = _op_name(op, api)
    return name if name in BINARY and name not in BITWISE else None


def _step(c: Call, views: list[View]) -> Step | str:
    """The step of call ``c`` (its views in order: destination, then its tensor arguments), or why it has none."""
    op = _OPS[c.name]
    if c.param("spec") is not None:  # the NKI 0.6/0.7 semantics of a few instructions (nki07/isa.py): not programs
        return f"{c.name} with its NKI {c.param('spec')} semantics"
    dst = views[0]
    dtype = c.views[0][5]
    srcs: list = []
    func: Any = None
    if op is Op.DMA:
        src = c.param("value" if c.name == "store" else "src")
        if not isinstance(src, Ref):
            return f"{c.name} of a scalar"
        srcs = [views[src.pos]]
        if srcs[0].shape != dst.shape and (c.name == "store" or _size(srcs[0]) != _size(dst)):
            return f"{c.name} that broadcasts"
    elif op is Op.BINARY:  # vector.binary
        name = _binary_name(c.param("name"), c.name)
        if name is None:
            return f"{c.name} with an op other than a float binary op"
        operands: list[tuple[str, Any]] = []
        for k in ("x", "y"):
            r = c.param(k)
            if isinstance(r, Ref):
                operands.append(("tile", len(srcs)))
                srcs.append(views[r.pos])
            elif r.__class__ is not bool and isinstance(r, (int, float, np.generic)):
                operands.append(("number", r))
            else:
                return f"nl.{name} of {type(r).__name__}"
        if any(v.items is not None for v in srcs):
            return f"nl.{name} of an index-array view"
        func = (BINARY[name], tuple(operands))
    elif op is Op.TENSOR_TENSOR:
        names = ("data1", "data2")
        refs = [c.param(k) for k in names]
        if not all(isinstance(r, Ref) for r in refs):
            return f"{c.name} of a scalar"
        srcs = [views[r.pos] for r in refs]
        name = _binary_name(c.param("op"), c.name)
        if name is None:
            return f"{c.name} with an op other than a float binary op"
        if srcs[0].shape != srcs[1].shape or srcs[0].shape != dst.shape:
            return f"{c.name} with broadcasting operands"
        func = BINARY[name]
    elif op is Op.UNARY:
        name = c.param("name")
        if name not in UNARY or name in ("invert", "logical_not"):
            return f"nl.{name}"
        x = c.param("x")
        if not isinstance(x, Ref):
            return f"nl.{name} of a scalar"
        srcs = [views[x.pos]]
        func = UNARY[name][0]
    elif op is Op.TENSOR_COPY:
        src = c.param("src")
        if not isinstance(src, Ref):
            return "tensor_copy of a scalar"
        srcs = [views[src.pos]]
        sd = srcs[0].sdtype
        if c.views[src.pos][5] != dtype or (sd.kind == "f" and sd != np.float32):
            func = np.float32  # the core reads fp32 when it casts or the source is not fp32
    elif op is Op.TENSOR_SCALAR:
        data = c.param("data")
        if not isinstance(data, Ref):
            return "tensor_scalar of a scalar"
        srcs = [views[data.pos]]
        if len(srcs[0].shape) != 2:
            return "tensor_scalar of a tile that is not 2-D"
        ops = []
        for i in ("0", "1"):
            o = c.param("op" + i)
            if o is None:
                continue
            name = _binary_name(o, c.name)
            if name is None:
                return "tensor_scalar with an op other than a float binary op"
            operand = c.param("operand" + i)
            if isinstance(operand, Ref):
                col = views[operand.pos]
                if col.shape != (srcs[0].shape[0], 1):
                    return "tensor_scalar with an operand tile that is not a (P, 1) column"
                ref: Any = len(srcs)
                srcs.append(col)
            elif isinstance(operand, (float, int, np.generic)) and operand.__class__ is not bool:
                ref = float(np.float32(operand))  # scalar_operand: np.float32(x)
            else:
                return "tensor_scalar with an operand that is not a number or a column"
            ops.append((BINARY[name], ref, bool(c.param("reverse" + i))))
        func = tuple(ops)
    elif op is Op.FILL:
        func = c.param("storage")
    elif op is Op.TRANSPOSE:
        data = c.param("data") if c.name == "nc_transpose" else c.param("x")
        if not isinstance(data, Ref) or views[data.pos].items is not None:
            return f"{c.name} of a scalar or an index-array view"
        srcs = [views[data.pos]]
    elif op is Op.BROADCAST:
        src = c.param("src")
        if not isinstance(src, Ref) or views[src.pos].items is not None:
            return "broadcast_to of a scalar or an index-array view"
        srcs = [views[src.pos]]
    elif op is Op.DMA_TRANSPOSE:
        src = c.param("src")
        if not isinstance(src, Ref):
            return "load_transpose2d without a tile source"
        srcs = [views[src.pos]]
        if len(srcs[0].shape) != 2 or srcs[0].items is not None or dst.shape != srcs[0].shape[::-1]:
            return "load_transpose2d of a view that is not a basic 2-D one"
    elif op is Op.MATMUL:
        if c.name == "matmul" and not c.param("transpose_x"):
            return "nl.matmul without transpose_x=True (a TensorE transpose and a copy first)"
        st, mv = (c.param("stationary"), c.param("moving")) if c.name == "nc_matmul" else (c.param("x"), c.param("y"))
        if not (isinstance(st, Ref) and isinstance(mv, Ref)):
            return f"{c.name} without tile operands"
        for k in ("is_stationary_onezero", "is_moving_onezero", "is_transpose", "accumulate", "perf_mode"):
            if c.param(k):
                return f"nc_matmul with {k}="
        srcs = [views[st.pos], views[mv.pos]]
        if srcs[0].items is not None or srcs[1].items is not None:
            return "nc_matmul of an index-array view"
    elif op is Op.TENSOR_REDUCE:
        name = c.param("op") if c.name == "tensor_reduce" else c.param("name")
        name = _op_name(name, c.name)
        data = c.param("data") if c.name == "tensor_reduce" else c.param("x")
        if name not in ("max", "min", "maximum", "minimum") or not isinstance(data, Ref):
            return "tensor_reduce with an op other than max / min (their result does not depend on the order)"
        srcs = [views[data.pos]]
        nd = len(srcs[0].shape)
        axis = c.param("axis")
        ax = (axis,) if isinstance(axis, int) else tuple(axis) if isinstance(axis, tuple) else None
        if ax is None or not all(isinstance(a, int) and 0 < (a + nd if a < 0 else a) < nd for a in ax):
            return "tensor_reduce with an axis that is not a free axis given as ints"
        if srcs[0].sdtype.kind != "f":
            return "tensor_reduce of an integer tile"
        func = (
            name,
            tuple(sorted(a + nd if a < 0 else a for a in ax)),
            bool(c.param("keepdims")),
            bool(c.param("negate")),
        )
    elif op is Op.ACTIVATION:
        name = _op_name(c.param("op"), c.name)
        data = c.param("data")
        if name not in UNARY or name in ("invert", "logical_not") or not isinstance(data, Ref):
            return f"activation with op {name}"
        srcs = [views[data.pos]]
        scale, bias = c.param("scale"), c.param("bias")
        if scale is not None and (isinstance(scale, Ref) or scale.__class__ is bool):
            return "activation with a tile scale"
        column = None  # the bias column's position in srcs, or a number bias
        if isinstance(bias, Ref):
            col = views[bias.pos]
            if col.shape != (srcs[0].shape[0], 1) or col.items is not None:
                return "activation with a bias tile that is not a (P, 1) column"
            column, bias = len(srcs), None
            srcs.append(col)
        elif bias is not None and (bias.__class__ is bool or not isinstance(bias, (int, float, np.generic))):
            return "activation with a bias that is not a number or a column"
        func = (UNARY[name][0], 1.0 if scale is None else scale, column, bias)
    return Step(op, func, dst, tuple(srcs), dtype, c.line)


def _size(v: View) -> int:
    return math.prod(v.shape)


def explain(outcome: Program | str, kind: str, n: int, file: str, line: int) -> None:
    """One line on stderr: how the loop at ``file:line`` ran (``SimOptions.explain_loops``): per iteration and why
    (``outcome`` a reason), or as a program up to iteration ``outcome.stop`` (the rest: the instruction cap, or the
    last iteration whose result waits for its destination after the loop)."""
    where = f"{file}:{line}"
    if isinstance(outcome, str):
        how = f"per iteration: {outcome}"
    else:
        stop = outcome.stop
        at_once = "run in order, one at a time" if outcome.sequential else "run at once"
        how = f"loop program: iterations 0-1 traced, 2-{stop - 1} {at_once}"
        if stop < n and outcome.r1.pending_end and stop == n - 1:
            how += f", {stop} per iteration (its result waits for its destination after the loop)"
        elif stop < n:
            how += f", {stop}-{n - 1} per iteration (the instruction cap, SimOptions.max_instructions)"
    name = "range" if kind == "range" else f"{kind}_range"
    print(f"[nki-kernels] {name}({n}) at {where}: {how}", file=sys.stderr, flush=True)
