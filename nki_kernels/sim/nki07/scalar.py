"""``nki.isa.NkiScalar`` (NKI 0.7, SDK 2.33): one integer computed on the device (docs/nki-0.7-spec.md S1-S6).

Sources: the 2.33-era API pages ``nki/api/generated/nki.isa.NkiScalar.html``, ``nki.isa.scalar_load.html``,
``nki.isa.scalar_store.html``, the deep dive ``nki/deep-dives/nki-scalar`` and the 2.33.0 page
``nki.language.fori_loop.html``.  An NkiScalar comes from ``nisa.scalar_load`` (or is the induction
variable of a ``fori_loop`` with int bounds); arithmetic on it is traced, not evaluated, so Python cannot
branch on it or turn it into an int.  The interpreter knows the value (it runs the program once) and keeps
it in ``_value``: the documented arithmetic (``+``, ``-``, unary ``-``, ``*``; the other operand a Python int
or an NkiScalar of the same dtype) wraps at the scalar's width (32 or 64 bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import dtypes as dt
from ..core.context import lenient
from ..core.errors import NKISyntaxError, SimNotImplementedError, SimTypeError, SimValueError
from ..core.scalar import WIDTHS, wrap

INT32, INT64 = np.dtype(np.int32), np.dtype(np.int64)


class TracedValueError(SimValueError, TypeError):
    """E015 for a traced value used where Python needs a concrete one (``bool()``, ``int()``, ``range()``):
    the pages say this raises TypeError (SDK 2.32 ``nki.isa.VirtualRegister`` note on the tracer), so the
    coded error is a TypeError too."""


def traced_use(what: str, api: str, fix: str) -> TracedValueError:
    return TracedValueError(
        "E015",
        api,
        None,
        f"{what}: under NKI 0.7's tracing a register / NkiScalar has no value while the kernel is specialized",
        fix,
    )


_LOOP_FIX = "Use nl.fori_loop(lower, upper, body) / nl.while_loop(reg, body) for loops that run on the device"


def _bits(dtype: np.dtype) -> int:
    return WIDTHS[dtype]


class NkiScalar:
    """``NkiScalar(state, dtype=None, is_comparison=False)``: the interpreter's ``state`` is the int value."""

    __nki_scalar__ = True
    __slots__ = ("_value", "dtype", "is_comparison")

    def __init__(self, state: Any = 0, dtype: Any = None, is_comparison: bool = False):
        d = INT32 if dtype is None else np.dtype(dtype)
        if d not in WIDTHS:
            raise SimTypeError(
                "E009",
                "NkiScalar",
                "dtype",
                f"an NkiScalar is nl.int32 or nl.int64, got {dt.name_of(d)}",
                "Load it from an nl.int32 (or nl.int64) tile with nisa.scalar_load",
            )
        self.dtype = d
        self.is_comparison = bool(is_comparison)
        self._value = wrap(int(state), _bits(d))

    def __repr__(self) -> str:
        kind = ", comparison" if self.is_comparison else ""
        return f"NkiScalar({self._value}, {dt.name_of(self.dtype)}{kind})"

    # ---- what Python cannot do with a traced value -------------------------------------------------
    def __bool__(self) -> bool:
        raise traced_use("bool() of an NkiScalar (an `if` / `while` on it)", "NkiScalar", _LOOP_FIX)

    def __int__(self) -> int:
        raise traced_use("int() of an NkiScalar", "NkiScalar", "Use the scalar itself (arithmetic, scalar_offset)")

    def __index__(self) -> int:
        raise traced_use(
            "an NkiScalar used as a Python index or range() bound", "NkiScalar", _LOOP_FIX + "; nl.ds / .ap offsets"
        )

    def __float__(self) -> float:
        raise traced_use("float() of an NkiScalar", "NkiScalar", "Use the scalar itself")

    __hash__ = object.__hash__

    # ---- checks ------------------------------------------------------------------------------------
    def usable(self, api: str) -> int:
        """The value, for an interpreter-internal use (offset, bound, store); E015 for a comparison result."""
        if self.is_comparison:
            raise SimValueError(
                "E015",
                api,
                None,
                f"{self!r} is the result of a comparison of NkiScalars: it is traced, but the result "
                "cannot be used (NkiScalar docs)",
                "Compare on the host, or compute a flag with tensor instructions",
            )
        return self._value

    def _other(self, o: Any, sym: str) -> int | None:
        """The other operand's value (None: not an operand this operator takes)."""
        self.usable(f"NkiScalar {sym}")
        if isinstance(o, NkiScalar):
            o.usable(f"NkiScalar {sym}")
            if o.dtype != self.dtype:
                # NkiScalar page: the other operand may be a Python int or another NkiScalar "so long as the
                # dtypes match"; a 32-bit scalar is never widened
                raise SimTypeError(
                    "E009",
                    f"NkiScalar {sym}",
                    None,
                    f"operands of different widths: {dt.name_of(self.dtype)} {sym} {dt.name_of(o.dtype)}",
                    "Load both scalars from tiles of the same dtype",
                )
            return o._value
        if isinstance(o, (int, np.integer)) and not isinstance(o, (bool, np.bool_)):
            v = int(o)
            bits = _bits(self.dtype)
            if wrap(v, bits) != v:
                # the pages do not say what a Python int outside the scalar's width does: it wraps like the
                # result would, with a warning (E011 under strict)
                msg = f"the Python int {v} does not fit the {dt.name_of(self.dtype)} scalar it meets: it wraps"
                lenient("nki07.scalar_immediate_width", msg, "Use a value in range", op=f"NkiScalar {sym}")
            return v
        return None

    def _arith(self, o: Any, sym: str, f: Any, reflected: bool = False) -> NkiScalar:
        v = self._other(o, sym)
        if v is None:
            return NotImplemented
        a, b = (v, self._value) if reflected else (self._value, v)
        return NkiScalar(f(a, b), self.dtype)

    def __add__(self, o: Any) -> NkiScalar:
        return self._arith(o, "+", lambda a, b: a + b)

    def __radd__(self, o: Any) -> NkiScalar:
        return self._arith(o, "+", lambda a, b: a + b, True)

    def __sub__(self, o: Any) -> NkiScalar:
        return self._arith(o, "-", lambda a, b: a - b)

    def __rsub__(self, o: Any) -> NkiScalar:
        return self._arith(o, "-", lambda a, b: a - b, True)

    def __mul__(self, o: Any) -> NkiScalar:
        return self._arith(o, "*", lambda a, b: a * b)

    def __rmul__(self, o: Any) -> NkiScalar:
        return self._arith(o, "*", lambda a, b: a * b, True)

    def __neg__(self) -> NkiScalar:
        return NkiScalar(-self.usable("NkiScalar -"), self.dtype)

    def __pos__(self) -> NkiScalar:
        return NkiScalar(self.usable("NkiScalar +"), self.dtype)

    # ---- comparisons: int32 traced (result unusable), int64 rejected ----------------------------------
    def _compare(self, o: Any, sym: str, f: Any) -> NkiScalar:
        if self.dtype == INT64:
            raise NKISyntaxError(
                "E021",
                f"NkiScalar {sym}",
                None,
                "comparisons of nl.int64 scalars are rejected at compile time (NkiScalar docs: at 64 bits only "
                "+, - and * exist)",
                "Compare 32-bit scalars, or compare on the host",
            )
        v = self._other(o, sym)
        if v is None:
            return NotImplemented
        return NkiScalar(int(f(self._value, v)), self.dtype, is_comparison=True)

    def __lt__(self, o: Any) -> NkiScalar:
        return self._compare(o, "<", lambda a, b: a < b)

    def __le__(self, o: Any) -> NkiScalar:
        return self._compare(o, "<=", lambda a, b: a <= b)

    def __gt__(self, o: Any) -> NkiScalar:
        return self._compare(o, ">", lambda a, b: a > b)

    def __ge__(self, o: Any) -> NkiScalar:
        return self._compare(o, ">=", lambda a, b: a >= b)

    def __eq__(self, o: Any) -> NkiScalar:  # type: ignore[override]
        return self._compare(o, "==", lambda a, b: a == b)

    def __ne__(self, o: Any) -> NkiScalar:  # type: ignore[override]
        return self._compare(o, "!=", lambda a, b: a != b)

    # ---- operators the pages we have do not list -------------------------------------------------------
    def _other_op(self, sym: str) -> Any:
        if self.dtype == INT64:
            raise NKISyntaxError(
                "E021",
                f"NkiScalar {sym}",
                None,
                f"`{sym}` on an nl.int64 scalar: at 64 bits only addition, subtraction and multiplication are "
                "available (NkiScalar docs)",
                "Compute it at 32 bits, or with tensor instructions",
            )
        return SimNotImplementedError(
            "E100",
            f"NkiScalar {sym}",
            None,
            f"`{sym}` on an NkiScalar is not modelled: the 2.33 pages we have document +, -, * and comparisons only",
            "Use +, - and *, or compute the value with tensor instructions",
        )

    def _unlisted(self, sym: str) -> Any:
        raise self._other_op(sym)

    def __floordiv__(self, o: Any) -> Any:
        return self._unlisted("//")

    __rfloordiv__ = __floordiv__

    def __truediv__(self, o: Any) -> Any:
        return self._unlisted("/")

    __rtruediv__ = __truediv__

    def __mod__(self, o: Any) -> Any:
        return self._unlisted("%")

    __rmod__ = __mod__

    def __lshift__(self, o: Any) -> Any:
        return self._unlisted("<<")

    __rlshift__ = __lshift__

    def __rshift__(self, o: Any) -> Any:
        return self._unlisted(">>")

    __rrshift__ = __rshift__

    def __and__(self, o: Any) -> Any:
        return self._unlisted("&")

    __rand__ = __and__

    def __or__(self, o: Any) -> Any:
        return self._unlisted("|")

    __ror__ = __or__

    def __xor__(self, o: Any) -> Any:
        return self._unlisted("^")

    __rxor__ = __xor__

    def __pow__(self, o: Any) -> Any:
        return self._unlisted("**")

    __rpow__ = __pow__


def value_of(x: Any, api: str) -> int:
    """An int from an int, a register (``.value``) or an NkiScalar (E015 for a comparison result): the
    interpreter's own reading, which never goes through ``int()`` (that raises for traced values)."""
    if isinstance(x, NkiScalar):
        return x.usable(api)
    if getattr(x, "__nki_register__", False):
        return int(x.value)
    return int(x)
