"""Symbolic loop indices of the NKI 0.1 front end (docs/nki-0.1-rules.md section 9).

The real front end runs the body of an ``nl.affine_range`` / ``nl.sequential_range`` loop (and of a ``range``
loop in the kernel function or in an ``@nki.jit(mode='trace')`` helper, which it turns into
``sequential_range``) once, with the loop variable bound to an affine ``Index`` expression (aws-neuron-sdk@49ee15c5
``general/nki/programming_model.rst`` "Representing data in NKI"; ``general/nki/api/nki/language/__init__.py``
``affine_range`` / ``sequential_range``).  The interpreter keeps executing every iteration eagerly, so an
:class:`Index` carries its concrete value (numerics unchanged) *and* its affine form; what changes is which
Python uses are legal:

* ``+``, ``-``, ``*`` by an int and unary ``-`` keep the index affine; ``//``, ``%`` and index * index give a
  non-affine index, legal as a subscript / offset but not in ``mask=`` (``err_unsupported_expression_in_mask``,
  E015);
* comparisons give a :class:`Predicate` (``&``, ``|``, ``~``), usable in ``mask=`` and as the test of an
  ``if``/``elif`` (a predicated region);
* anything that needs a Python int -- a list/tuple/dict subscript, ``int()``, ``float()``, ``hash``, ``len``,
  iteration, a shape, ``min``/``max``, ``bool()`` outside an ``if`` test -- raises E028 at the user's line.

Interpreter code may convert an index to its concrete value (``int()``/``operator.index`` called from a frame
inside ``nki_kernels/sim``), so every NKI API that takes an index (subscripts, ``nl.ds``, ``tile_position``,
offsets) accepts one unchanged; APIs that need a trace-time int (shapes, ``nl.arange``) reject it explicitly
through :func:`reject_in_shape`.
"""

from __future__ import annotations

import ast
import itertools
import operator
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..core.context import lenient, maybe_current
from ..core.errors import _SIM_DIR, NKISyntaxError, SimValueError
from ..core.tensor import Tensor
from ..kernel_ast import _dotted, _lookup, analyze_code, control_flow_site, with_range

Terms = tuple[tuple[int, int], ...]

_FIX = (
    "A loop index of nl.affine_range / nl.sequential_range / a kernel `range` has no Python value at trace "
    "time; iterate with nl.static_range for Python values, or express it with a mask= / an `if` predicate"
)
_keys = itertools.count(1)


def _e028(what: str, fix: str = _FIX) -> NKISyntaxError:
    # pm.index_needs_int (aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst "Representing data in NKI")
    return NKISyntaxError("E028", "loop index", None, what, fix)


def _internal(depth: int = 2) -> bool:
    """Is the caller's caller interpreter code (which may read an index's concrete value)?"""
    return sys._getframe(depth).f_code.co_filename.startswith(_SIM_DIR)


def _merge(a: Terms, b: Terms, sign: int) -> Terms:
    if len(a) == 1 and len(b) == 1:
        # one term each (`kh * KW + kw`, `rr + kh`), the common case: what the dict below computes -- the
        # coefficients summed for one key, else both terms in key order; zero coefficients dropped
        (ka, ca), (kb, cb) = a[0], b[0]
        cb = sign * cb
        if ka == kb:
            c = ca + cb
            return ((ka, c),) if c else ()
        lo, hi = ((ka, ca), (kb, cb)) if ka < kb else ((kb, cb), (ka, ca))
        if ca and cb:
            return (lo, hi)
        return tuple(t for t in (lo, hi) if t[1])
    d = dict(a)
    for k, c in b:
        d[k] = d.get(k, 0) + sign * c
    return tuple((k, c) for k, c in sorted(d.items()) if c)


def _is_int(o: object) -> bool:
    c = o.__class__
    return c is int or (isinstance(o, (int, np.integer)) and c is not bool and not isinstance(o, (bool, np.bool_)))


class Index:
    """A symbolic loop index (or an expression of loop indices / ``nl.program_id``): ``v`` the concrete value
    of the running iteration, ``terms`` the affine form ``((key, coeff), ...)`` plus ``const`` (``terms`` None:
    not affine)."""

    __slots__ = ("v", "terms", "const")
    __array_priority__ = 200
    __array_ufunc__ = None  # NumPy scalars defer to the reflected operators

    v: int
    terms: Terms | None
    const: int

    def __init__(self, v: int, terms: Terms | None, const: int = 0) -> None:
        self.v = v
        self.terms = terms
        self.const = const

    @staticmethod
    def loop(v: int, key: int) -> Index:
        return Index(v, ((key, 1),), 0)

    @property
    def affine(self) -> bool:
        return self.terms is not None

    # -- arithmetic -------------------------------------------------------------------------------------------
    def _nonaffine(self, v: int) -> Index:
        return Index(v, None, 0)

    def __add__(self, o: object) -> Any:
        c = o.__class__
        if c is Index:
            oi: Index = o  # type: ignore[assignment]
            if self.terms is None or oi.terms is None:
                return Index(self.v + oi.v, None)
            return Index(self.v + oi.v, _merge(self.terms, oi.terms, 1), self.const + oi.const)
        if c is int:  # the _is_int branch below for a plain int (int(o) is o), without the calls
            return Index(self.v + o, self.terms, self.const + o)  # type: ignore[operator]
        if _is_int(o):
            n = int(o)  # type: ignore[call-overload]
            return Index(self.v + n, self.terms, self.const + n)
        return self._other(o, "+")

    __radd__ = __add__

    def __sub__(self, o: object) -> Any:
        if o.__class__ is Index:
            oi: Index = o
            if self.terms is None or oi.terms is None:
                return Index(self.v - oi.v, None)
            return Index(self.v - oi.v, _merge(self.terms, oi.terms, -1), self.const - oi.const)
        if _is_int(o):
            n = int(o)  # type: ignore[call-overload]
            return Index(self.v - n, self.terms, self.const - n)
        return self._other(o, "-")

    def __rsub__(self, o: object) -> Any:
        if _is_int(o):
            n = int(o)  # type: ignore[call-overload]
            return (-self).__add__(n)
        return self._other(o, "-")

    def __neg__(self) -> Index:
        if self.terms is None:
            return Index(-self.v, None)
        return Index(-self.v, tuple((k, -c) for k, c in self.terms), -self.const)

    def __pos__(self) -> Index:
        return self

    def __mul__(self, o: object) -> Any:
        if o.__class__ is int or _is_int(o):
            n = int(o)  # type: ignore[call-overload]
            if self.terms is None:
                return Index(self.v * n, None)
            return Index(self.v * n, tuple((k, c * n) for k, c in self.terms if c * n), self.const * n)
        if o.__class__ is Index:
            return Index(self.v * o.v, None)
        return self._other(o, "*")

    __rmul__ = __mul__

    def __floordiv__(self, o: object) -> Any:
        if _is_int(o) or o.__class__ is Index:
            return Index(self.v // _val(o), None)
        return self._other(o, "//")

    def __rfloordiv__(self, o: object) -> Any:
        if _is_int(o):
            return Index(_val(o) // self.v, None)
        return self._other(o, "//")

    def __mod__(self, o: object) -> Any:
        if _is_int(o) or o.__class__ is Index:
            return Index(self.v % _val(o), None)
        return self._other(o, "%")

    def __rmod__(self, o: object) -> Any:
        if _is_int(o):
            return Index(_val(o) % self.v, None)
        return self._other(o, "%")

    def __pow__(self, o: object) -> Any:
        if _is_int(o):
            return Index(self.v ** _val(o), None)
        return self._other(o, "**")

    def __abs__(self) -> Index:
        return Index(abs(self.v), None)

    def _bits(self, o: object, f: Callable[[int, int], int], op: str) -> Any:
        if _is_int(o) or o.__class__ is Index:
            return Index(f(self.v, _val(o)), None)
        return self._other(o, op)

    def __and__(self, o: object) -> Any:
        return self._bits(o, int.__and__, "&")

    def __or__(self, o: object) -> Any:
        return self._bits(o, int.__or__, "|")

    def __xor__(self, o: object) -> Any:
        return self._bits(o, int.__xor__, "^")

    def __lshift__(self, o: object) -> Any:
        return self._bits(o, int.__lshift__, "<<")

    def __rshift__(self, o: object) -> Any:
        return self._bits(o, int.__rshift__, ">>")

    def __rand__(self, o: object) -> Any:
        return self._bits(o, lambda a, b: b & a, "&")

    def __ror__(self, o: object) -> Any:
        return self._bits(o, lambda a, b: b | a, "|")

    def __rxor__(self, o: object) -> Any:
        return self._bits(o, lambda a, b: b ^ a, "^")

    def __rlshift__(self, o: object) -> Any:
        return self._bits(o, lambda a, b: b << a, "<<")

    def __rrshift__(self, o: object) -> Any:
        return self._bits(o, lambda a, b: b >> a, ">>")

    def __invert__(self) -> Index:
        return Index(~self.v, None)

    def __divmod__(self, o: object) -> Any:
        return (self // o, self % o)

    def _other(self, o: object, op: str) -> Any:
        if isinstance(o, (float, np.floating)):
            if _internal(3):
                return NotImplemented
            raise _e028(
                f"`{op}` of a loop index and a float: an index is an integer affine expression",
                "Keep index arithmetic in ints (use // for division)",
            )
        return NotImplemented

    def __truediv__(self, o: object) -> Any:
        raise _e028("`/` of a loop index: an index is an integer affine expression", "Use // (integer division)")

    __rtruediv__ = __truediv__

    # -- comparisons: predicates ------------------------------------------------------------------------------
    def _cmp(self, o: object, f: Callable[[Any, Any], Any]) -> Any:
        if o.__class__ is Index:
            oi: Index = o
            return Predicate(f(self.v, oi.v), self.terms is not None and oi.terms is not None)
        if _is_int(o):
            return Predicate(f(self.v, int(o)), self.terms is not None)  # type: ignore[call-overload]
        if isinstance(o, (float, np.floating)):
            # `if i < n / 2:` -- the bound is a trace-time constant; compare the concrete value
            return Predicate(f(self.v, o), self.terms is not None)
        return NotImplemented

    def __lt__(self, o: object) -> Any:
        return self._cmp(o, operator.lt)

    def __le__(self, o: object) -> Any:
        return self._cmp(o, operator.le)

    def __gt__(self, o: object) -> Any:
        return self._cmp(o, operator.gt)

    def __ge__(self, o: object) -> Any:
        return self._cmp(o, operator.ge)

    def __eq__(self, o: object) -> Any:
        return self._cmp(o, operator.eq)

    def __ne__(self, o: object) -> Any:
        return self._cmp(o, operator.ne)

    # -- uses that need a Python int: E028 (interpreter code may read the value) ------------------------------
    def __index__(self) -> int:
        if sys._getframe(1).f_code.co_filename.startswith(_SIM_DIR):  # _internal(), inlined (a call less)
            return self.v
        f = sys._getframe(1)
        if _called_name(f) == "range":
            # Python's range (a plain helper, a nested function): the same decision as the kernel's range(i)
            bound_args("range", (self,))
            return self.v
        raise _e028("a loop index used where Python needs an int (a list/tuple subscript, range(), a NumPy index, ...)")

    def __int__(self) -> int:
        if sys._getframe(1).f_code.co_filename.startswith(_SIM_DIR):  # _internal(), inlined (a call less)
            return self.v
        raise _e028("int() of a loop index")

    def __float__(self) -> float:
        if _internal():
            return float(self.v)
        raise _e028("float() of a loop index")

    def __hash__(self) -> int:
        if _internal():
            return hash(self.v)
        raise _e028("a loop index used as a dict key / set element (it is hashed)")

    def __len__(self) -> int:
        raise _e028("len() of a loop index")

    def __iter__(self) -> Iterator[int]:
        raise _e028("iterating over a loop index")

    def __bool__(self) -> bool:
        f = sys._getframe(1)
        if f.f_code.co_filename.startswith(_SIM_DIR):
            return bool(self.v)
        return truth_value(control_flow_site(f), "a loop index")

    def __repr__(self) -> str:
        if self.terms is None:
            return f"Index(non-affine, value={self.v})"
        form = " + ".join(f"{c}*i{k}" for k, c in self.terms) or "0"
        return f"Index({form} + {self.const}, value={self.v})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self.v, spec) if spec else repr(self)


def _val(o: object) -> int:
    return o.v if o.__class__ is Index else int(o)  # type: ignore[call-overload]


def _called_name(frame: types.FrameType) -> str | None:
    """The dotted name of the function the call instruction ``frame`` is executing calls, from the source (None
    when it is not a call or there is no source)."""
    code = frame.f_code
    if not hasattr(code, "co_positions"):
        return None
    pos = next((p for n, p in enumerate(code.co_positions()) if 2 * n == frame.f_lasti), None)
    if pos is None or pos[0] is None:
        return None
    fn, _ = _lookup(code, frame.f_globals)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and node.lineno == pos[0] and node.col_offset == pos[2]:
            return _dotted(node.func)
    return None


def concrete(x: object) -> object:
    """``x`` with an :class:`Index` replaced by its concrete value (other values unchanged)."""
    return x.v if x.__class__ is Index else x


# ------------------------------------------------------------------------------------------------------------
# predicates and the `if` test
# ------------------------------------------------------------------------------------------------------------
# called with (frame, line, value) when a predicate is the test of an `if`/`elif` (a predicated region), for
# the scope rules; None: nobody listens
predicated_if_hook: Callable[[types.FrameType, int, bool], None] | None = None


class Predicate:
    """A comparison of loop indices (concrete ``v`` + whether its operands are affine)."""

    __slots__ = ("v", "affine")
    __array_priority__ = 200
    __array_ufunc__ = None

    v: bool
    affine: bool

    def __init__(self, v: bool, affine: bool) -> None:
        self.v = bool(v)
        self.affine = affine

    def _b(self, o: object, f: Callable[[bool, bool], bool]) -> Any:
        if o.__class__ is Predicate:
            op: Predicate = o
            return Predicate(f(self.v, op.v), self.affine and op.affine)
        if isinstance(o, (bool, np.bool_)):
            return Predicate(f(self.v, bool(o)), self.affine)
        return NotImplemented

    def __and__(self, o: object) -> Any:
        return self._b(o, lambda a, b: a and b)

    __rand__ = __and__

    def __or__(self, o: object) -> Any:
        return self._b(o, lambda a, b: a or b)

    __ror__ = __or__

    def __xor__(self, o: object) -> Any:
        return self._b(o, lambda a, b: a != b)

    __rxor__ = __xor__

    def __invert__(self) -> Predicate:
        return Predicate(not self.v, self.affine)

    def __bool__(self) -> bool:
        f = sys._getframe(1)
        if f.f_code.co_filename.startswith(_SIM_DIR):
            return self.v
        site = control_flow_site(f)
        ctx = maybe_current()
        if ctx is not None and ctx.recorder is not None:
            ctx.recorder.fail(f"a loop-index predicate decides control flow at line {f.f_lineno}")
        if site == "if":
            # a predicated region: the body runs in the iterations where the predicate holds, as the hardware's
            # predication does (PM "Representing data in NKI"; nki-samples flash_fwd `if i < n_tile_q:`)
            hook = predicated_if_hook
            if hook is not None:
                hook(f, f.f_lineno, self.v)
            return self.v
        return truth_value(site, "a loop-index predicate")

    def __repr__(self) -> str:
        return f"Predicate({self.v}{'' if self.affine else ', non-affine'})"


def truth_value(site: str, what: str) -> bool:
    """The truth value of a loop index or loop-index predicate outside an ``if`` test (``site`` as
    :func:`~nki_kernels.sim.kernel_ast.control_flow_site` says).  At trace time the index has no Python value;
    Python calls ``bool()`` on the object the tracer holds, which defines no ``__bool__`` and so is true
    (spec corrections turn 4, item I): ``min(k, n - i * k)`` is ``n - i * k`` (``min`` keeps the second operand
    when ``second < first`` is true), ``p and q`` is ``q``, ``p or q`` is ``p``, ``not p`` is False -- for every
    iteration.  No source documents an error, and public code that ran relies on it (CS149 solutions bound masks
    with ``min``; AWS's flash-attention backward joins index predicates with ``and``): the lenient rule
    pm.predicate_truth_value, and the interpreter computes what the traced kernel computes (true).  A ``while``
    on it never ends at trace time: E028."""
    if site == "while":
        raise _e028(
            f"{what} as the condition of a `while`: it has no Python value at trace time, so the traced loop's "
            "condition is always true and the trace never ends",
            "Loop with nl.affine_range / nl.sequential_range over a trip count, and predicate the ragged part "
            "with an `if` or mask=",
        )
    how = {
        "jump": "in a conditional expression (`x if p else y`), an assert or a comprehension filter",
        "boolop": "in `and` / `or`",
        "call": "outside an `if` test (bool(), not, min()/max(), `in`, ...)",
        "if": "as an `if` test",
    }[site]
    lenient(
        "pm.predicate_truth_value",
        f"the truth value of {what} {how}: the traced kernel sees an object without a Python value, which is true "
        "for every iteration (`min(a, b)` is b, `p and q` is q, `not p` is False); this run computes that",
        "Write the condition as an `if` test or a mask= predicate (combine predicates with & | ~), or iterate "
        "with nl.static_range for Python values",
        op="loop index",
    )
    return True


# ------------------------------------------------------------------------------------------------------------
# loops
# ------------------------------------------------------------------------------------------------------------
def bound_args(api: str, args: tuple, static: bool = False) -> tuple:
    """Loop bounds as ints.  A symbolic bound (``range(i)``, ``nl.affine_range(i + 1)``): the sources are silent
    (docs/nki-0.1-rules.md section 11 item 1): a SimWarning at the user's line, E028 under strict; for
    ``nl.static_range`` (unrolled at trace time) always E028."""
    if not any(a.__class__ is Index for a in args):
        return args
    msg = (
        f"{api}() with a loop-index bound: the trip count depends on an enclosing symbolic loop index, which "
        "has no value at trace time"
    )
    fix = (
        "Use a constant trip count and a mask= / `if` predicate for the ragged part, or nl.static_range for the "
        "enclosing loop"
    )
    if static:
        raise _e028(msg, fix)
    lenient("pm.index_range_bound", msg + " (the interpreter uses this iteration's value)", fix, op="loop index")
    return tuple(concrete(a) for a in args)


def symbolic(inner: Iterator[int]) -> Iterator[Index | int]:
    """The iterations of ``inner`` (a core loop yielding ints) as symbolic indices; when the loop ends, the
    check of Python state carried out of its body (:func:`check_loop_state`)."""
    if maybe_current() is None:
        yield from inner  # outside a kernel (a host-side script): plain ints
        return
    key = next(_keys)
    for v in inner:
        yield Index(v, ((key, 1),), 0)
    f = sys._getframe(1)
    if f is not None and not f.f_code.co_filename.startswith(_SIM_DIR):
        check_loop_state(f)


_PY_STATE = (int, float, complex, str, bytes, list, tuple, dict, set, np.number, np.bool_)


# (id(code), kernel_scope, line of the `for`) -> (code, the loop's site, its loop_state entries), derived once from
# kernel_ast.analyze_code, whose result per (code, kernel_scope) is computed once and kept for the process; the code
# object is held here so that its id is not reused
_LOOP_STATE: dict[tuple[int, bool, int], tuple[types.CodeType, Any, tuple]] = {}


def _loop_state_at(frame: types.FrameType, kernel_scope: bool) -> tuple[types.CodeType, Any, tuple]:
    """(code, site, states): the loop whose ``for`` is on ``frame``'s line and the entries of ``loop_state`` of
    its block, in order (site None and states empty without source, loop state or loop at that line)."""
    code = frame.f_code
    key = (id(code), kernel_scope, frame.f_lineno)
    hit = _LOOP_STATE.get(key)
    if hit is None:
        fs = analyze_code(code, kernel_scope=kernel_scope, module_globals=frame.f_globals)
        site = None
        states: tuple = ()
        if fs is not None and fs.loop_state:
            site = fs.loop_at(frame.f_lineno)
            if site is not None:
                states = tuple(st for st in fs.loop_state if st.block == site.block)
        hit = _LOOP_STATE[key] = (code, site, states)
    return hit


def check_loop_state(frame: types.FrameType) -> None:
    """pm.loop_body_traced_once: a Python value updated in a symbolic loop body and read after the loop holds
    one iteration's value on hardware (the body is traced once: aws-neuron-sdk@81ce03ae nki/migration/index.rst
    "Consistent control flow behavior").  It compiles, so: a SimWarning at the update line, E028 under strict
    (docs/nki-0.1-rules.md section 11 item 12).  ``frame`` is the user frame whose ``for`` statement ended."""
    ctx = maybe_current()
    if ctx is None:
        return
    _, site, states = _loop_state_at(frame, frame.f_code in TRACED_CODES)
    if not states:
        return  # no Python state carried out of this loop: the frame's locals are not read
    local = frame.f_locals
    for st in states:
        if st.name not in local:
            continue
        value = local[st.name]
        if not isinstance(value, _PY_STATE) or isinstance(value, Index):
            continue  # NKI tensors (the scope rules' business) and indices
        file, line = frame.f_code.co_filename, st.update_lines[0]
        msg = (
            f"`{st.name}` is a Python value updated in the body of a symbolic loop (line {site.line}) and read "
            f"after it (line {st.use_lines[0]}): NKI 0.1 traces the body once, so on hardware it holds one "
            "iteration's update, not one per iteration (the interpreter runs every iteration)"
        )
        fix = (
            "Compute it outside the loop (e.g. from the trip count), keep it in an NKI tensor, or iterate with "
            "nl.static_range"
        )
        lenient("pm.loop_body_traced_once", msg, fix, op="loop state", arg=st.name, where=(file, line))


def traced_once(frame: types.FrameType) -> bool | str:
    """For the ``for`` statement running in ``frame`` (it just called nl.affine_range): True when its body can run as
    a loop program (core/program.py), else why not: a Python value the body updates and the code after the loop
    reads would hold one update per traced iteration, not one per iteration."""
    kernel_scope = frame.f_code in TRACED_CODES
    _, _, states = _loop_state_at(frame, kernel_scope)
    for st in states:
        if not isinstance(frame.f_locals.get(st.name), Tensor):  # a tile's `+=` is an instruction, not Python state
            return f"the body updates Python state read after the loop (`{st.name}`, line {st.update_lines[0]})"
    fs = analyze_code(frame.f_code, kernel_scope=kernel_scope, module_globals=frame.f_globals)
    site = fs.loop_at(frame.f_lineno) if fs is not None else None
    if fs is not None and site is not None:
        for sc in fs.scope_candidates:
            # a name the body reads before binding it: an earlier iteration's value (`off += step`); the program
            # would extrapolate two iterations' Python values, so unless it holds a tile (whose iterations the
            # program compares itself), every iteration runs
            if sc.block == site.block and sc.carried_lines and not isinstance(frame.f_locals.get(sc.name), Tensor):
                return (
                    f"the body carries Python state from one iteration to the next (`{sc.name}`, "
                    f"line {sc.carried_lines[0]})"
                )
        for c in fs.calls:
            name = c.callee.rsplit(".", 1)[-1]
            if c.line in site.body and name in _SIDE_EFFECTS and c.callee.split(".", 1)[0] not in _NKI_ROOTS:
                return f"the body calls {c.callee} (line {c.line}): a Python side effect, run once per iteration here"
    return True


# calls in a loop body whose effect the kernel's Python sees (printing, growing a container): with them the loop runs
# every iteration, so that the effect happens once per iteration as before (a program runs the body's Python twice)
_SIDE_EFFECTS = frozenset(("print", "append", "extend", "insert", "add", "update", "setdefault", "pop", "remove"))
_NKI_ROOTS = frozenset(("nl", "nisa", "nki", "np", "numpy", "language", "isa"))


def index_use(n: int, k: Any) -> None:
    """A loop index (or a slice bounded by one) indexes a dimension of size ``n``: the traced body's recorder notes
    the elements it selects, or fails for an index that is not affine (core/program.py); ``n`` -1: a part of an
    index-array subscript (its bounds are the program's view check)."""
    ctx = maybe_current()
    rec = ctx.recorder if ctx is not None else None
    if rec is None:
        return
    if n < 0:
        if k.__class__ is Index and k.terms is not None:
            return  # an int index of an index-array view: Tensor.take checks it, the program checks the view
        rec.fail("an index-array expression that is not affine")
        return
    if k.__class__ is Index:
        if k.terms is None:
            rec.fail("an index that is not affine in the loop indices")
        else:
            rec.index(n, k.v, k.v + 1)
        return
    parts = (k.start, k.stop, k.step)
    if any(b.__class__ is Index and b.terms is None for b in parts):
        rec.fail("a slice bound that is not affine in the loop indices")
        return
    start, stop, step = (b.v if b.__class__ is Index else b for b in parts)
    if step not in (None, 1):
        rec.fail("a strided slice bounded by a loop index")
        return
    rec.index(n, 0 if start is None else start, n if stop is None else stop)


def program_index(axis: int, v: int) -> Index:
    """``nl.program_id(axis)``: an index of the launch grid (same rules as a loop index; section 11 item 11)."""
    return Index(v, ((-1 - axis, 1),), 0)


def reject_in_shape(api: str, values: object) -> None:
    """E028 when a shape (or another trace-time int argument) holds a loop index."""
    vals = values if isinstance(values, (tuple, list)) else (values,)
    for s in vals:
        if s.__class__ is Index:
            raise _e028(
                f"a loop index in the shape of {api}: shapes are trace-time ints",
                "Size the tile for the largest iteration and write the ragged part with mask=, or "
                "iterate with nl.static_range",
            )


def slice_extent(k: slice, name: str) -> None:
    """E028 when the extent of the slice ``k`` (bounded by loop indices) is not a trace-time constant, e.g.
    ``a[i * 128 : n]`` or ``a[i * 128 : i * 128 + min(128, n - i * 128)]``: the programming model ("Tile size
    considerations", aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst) sizes tiles statically and writes
    the ragged last tile with mask=."""
    if k.step is not None and k.step.__class__ is Index:
        raise _e028(f"a loop index as the step of a slice of `{name}`: a tile's shape is a trace-time int")
    if k.step not in (None, 1):
        return  # a strided slice (t[:, i::2]): its extent may not vary over the iterations; cannot tell, accept
    a, b = k.start, k.stop
    if a.__class__ is Index and b.__class__ is Index:
        d = b - a
        if d.__class__ is not Index or d.terms is None or not d.terms:
            return  # the same affine terms on both sides (a constant extent), or non-affine: cannot tell, accept
    raise _e028(
        f"the extent of the slice {a!r}:{b!r} of `{name}` depends on a loop index: a tile's shape is a trace-time int",
        "Slice a constant extent (i * 128 : i * 128 + 128, or nl.ds(i * 128, 128)) and write the ragged last "
        "tile with mask= (programming model, 'Tile size considerations')",
    )


def mask_of_predicate(p: Predicate, api: str) -> bool:
    """``mask=`` given a loop-index predicate: its concrete value (E015 when not affine)."""
    if not p.affine:
        raise_nonaffine_mask(api)
    return p.v


def raise_nonaffine_mask(api: str) -> None:
    # ERR err_unsupported_expression_in_mask (SDK 2.26 nki.errors.rst): masks are affine expressions of loop
    # indices; `%`, `//` and index products are not
    raise SimValueError(
        "E015",
        api,
        "mask",
        "the mask is not an affine expression of loop indices "
        "(err_unsupported_expression_in_mask: `%`, `//` and products of indices are not affine)",
        "Write the predicate as a linear combination of indices plus a constant (a*i + b*j + c "
        "< n), or split the loop so the condition becomes affine",
    )


# ------------------------------------------------------------------------------------------------------------
# the kernel's `range`
# ------------------------------------------------------------------------------------------------------------
# code objects whose `range` loops are symbolic: the kernel functions and mode='trace' helpers being run
TRACED_CODES: set[types.CodeType] = set()


def symbolic_range_site(frame: types.FrameType) -> bool:
    """Is the ``range(...)`` called from ``frame`` the iterator of a ``for`` statement of a kernel function or
    ``mode='trace'`` helper (which the front end turns into ``nl.sequential_range``)?"""
    if frame.f_code not in TRACED_CODES:
        return False  # a nested function or plain helper sharing the kernel's globals: unrolled (NKI-917 note)
    fs = analyze_code(frame.f_code, kernel_scope=True, module_globals=frame.f_globals)
    if fs is None:
        return False
    site = fs.loop_at(frame.f_lineno)
    return site is not None and site.iterator == "range" and bool(site.symbolic)


def traced_function(func: Callable[..., Any], range_fn: Callable[..., object]) -> Callable[..., Any]:
    """``func`` re-bound to globals where ``range`` is ``range_fn`` (the kernel's ``range`` becomes a symbolic
    ``sequential_range``), or ``func`` itself when that is not possible or not needed (not a plain function, a
    module that rebinds ``range``, a function declaring ``global`` names)."""
    if not isinstance(func, types.FunctionType):
        return func
    TRACED_CODES.add(func.__code__)
    return with_range(func, range_fn)
