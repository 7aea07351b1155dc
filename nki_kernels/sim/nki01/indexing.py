"""NKI 0.1 index expressions and masks: ``nl.arange`` / ``nl.mgrid`` values (:class:`IndexExpr`),
predicates over them (:class:`MaskExpr`) and the evaluation of ``mask=`` (spec §4, §6).

They belong to the NKI 0.1 front end: the op core only sees the integer index arrays and boolean
masks they evaluate to."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NoReturn, overload

import numpy as np

from ..core.context import lenient, unproven
from ..core.errors import _SIM_DIR, NKISyntaxError, SimValueError
from ..kernel_ast import control_flow_site
from .symbolic import Index, Predicate, raise_nonaffine_mask


def _iv(x):
    c = x.__class__
    if c is Index:
        return x.v
    return x.v if isinstance(x, IndexExpr) else x


def _level(o) -> int:
    """How affine an index-expression operand is: 0 affine; 1 affine in the aranges with a non-affine loop-index
    term (``(h // 2) * 128 + i_p``: a constant in each iteration once the compiler unrolls the loop); 2 not affine
    in the aranges (``i_p % 2``, ``i_p * i_f``)."""
    if o.__class__ is Index:
        return 0 if o.terms is not None else 1
    return o.LEVEL if isinstance(o, (IndexExpr, MaskExpr)) else 0


def _grid(a: tuple | bool, b: tuple | bool) -> tuple | bool:
    """The index space of an expression combining two operands built from nl.mgrid fields (their grids
    broadcast), or False."""
    if a and b and a is not True and b is not True:
        return tuple(np.broadcast_shapes(a, b))
    return a or b


class IndexExpr:
    """An affine index tensor: ``nl.arange(n)[:, None]``, ``mgrid`` fields, ``k*128 + i_p``; with a loop index
    (:class:`~.symbolic.Index`) its concrete value is used.  ``mgrid``: built from ``nl.mgrid`` fields (KI:
    "nl.mgrid won't work" for indirect load/store), then the shape of their whole grid: an expression of some
    fields still spans it (``nisa.iota(3 * g.y + g.z)`` of ``g = nl.mgrid[0:P, 0:W, 0:3, 0:3]`` is a (P, W, 3, 3)
    tile, as nki-samples' select_and_scatter annotates it)."""

    __slots__ = ("v", "mgrid")
    __array_priority__ = 100
    LEVEL = 0

    def __init__(self, v: Any, mgrid: tuple | bool = False):
        self.v = np.asarray(v, dtype=np.int64)
        self.mgrid = mgrid

    def full(self) -> np.ndarray:
        """The values over the expression's whole index space (an mgrid expression spans its grid)."""
        m = self.mgrid
        if m and m is not True and self.v.shape != m:
            return np.broadcast_to(self.v, np.broadcast_shapes(self.v.shape, m))
        return self.v

    shape = property(lambda s: s.v.shape)
    ndim = property(lambda s: s.v.ndim)

    def __getitem__(self, key: Any) -> IndexExpr:
        return self.__class__(self.v[key], bool(self.mgrid))

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        # ERR err_cannot_assign_to_index (SDK 2.26 nki.errors.rst): an index tensor is not a tile
        raise NKISyntaxError(
            "E014",
            "index",
            None,
            "'index' tensor does not support item assignment (ERR err_cannot_assign_to_index)",
            "Convert it to a tile first with nisa.iota(index, dtype=...), then assign into the tile",
        )

    def _bin(self, o, f, affine=True):
        if isinstance(o, (IndexExpr, int, np.integer, Index)):
            # `//`, `%` and index * index are not affine: fine in a subscript, E015 in mask=
            # (ERR err_unsupported_expression_in_mask, SDK 2.26 nki.errors.rst)
            level = max(self.LEVEL, _level(o)) if affine else 2
            mgrid = _grid(self.mgrid, isinstance(o, IndexExpr) and o.mgrid)
            return _INDEX[level](f(self.v, _iv(o)), mgrid)
        return NotImplemented

    def _mul(self, o):
        return self._bin(o, np.multiply, not isinstance(o, (IndexExpr, Index)))

    __add__ = lambda s, o: s._bin(o, np.add)
    __radd__ = lambda s, o: s._bin(o, np.add)
    __sub__ = lambda s, o: s._bin(o, np.subtract)
    __rsub__ = lambda s, o: s._bin(o, lambda a, b: b - a)
    __mul__ = _mul
    __rmul__ = _mul
    __floordiv__ = lambda s, o: s._bin(o, np.floor_divide, False)
    __mod__ = lambda s, o: s._bin(o, np.mod, False)
    __neg__ = lambda s: s.__class__(-s.v, s.mgrid)

    def _cmp(self, o, f):
        if isinstance(o, (IndexExpr, int, np.integer, Index)):
            return _MASK[max(self.LEVEL, _level(o))](f(self.v, _iv(o)))
        return NotImplemented

    __lt__ = lambda s, o: s._cmp(o, np.less)
    __le__ = lambda s, o: s._cmp(o, np.less_equal)
    __gt__ = lambda s, o: s._cmp(o, np.greater)
    __ge__ = lambda s, o: s._cmp(o, np.greater_equal)

    def __eq__(self, o: object) -> Any:  # a MaskExpr, not a bool
        return self._cmp(o, np.equal)

    def __ne__(self, o: object) -> NoReturn:
        raise SimValueError(
            "E015",
            "mask",
            None,
            "'!=' is not supported in NKI mask expressions",
            "Write the predicate with <, <=, >, >= combined by &",
        )

    # typeshed's idiom for an unhashable class (list, dict): object.__hash__ is a method in its stubs
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __bool__(self) -> NoReturn:
        raise SimValueError(
            "E015",
            "index",
            None,
            "an index expression has no truth value (control flow cannot depend on arange)",
            "Use it in mask= instead of an if statement",
        )

    def __repr__(self) -> str:
        return (
            f"IndexExpr(shape={self.v.shape}, range=[{self.v.min() if self.v.size else 0}, "
            f"{self.v.max() if self.v.size else 0}])"
        )


class IterIndexExpr(IndexExpr):
    """An index expression affine in its aranges with a non-affine loop-index term (``(h // 2) * 128 + i_p``):
    in mask= the lenient rule pm.mask_loop_index_nonaffine."""

    __slots__ = ()
    LEVEL = 1


class NonAffineIndexExpr(IndexExpr):
    """An index expression with ``//``, ``%`` or a product of indices: a valid subscript, not a mask operand."""

    __slots__ = ()
    LEVEL = 2


def _mask_operand(o):
    """(bool value or array, affinity level as :func:`_level`) of a mask operand, or None."""
    c = o.__class__
    if c is Predicate:
        return o.v, 0 if o.affine else 2
    if isinstance(o, MaskExpr):
        return o.v, o.LEVEL
    if isinstance(o, (bool, np.bool_)):
        return bool(o), 0
    return None


class MaskExpr:
    """A predicate over index points (built from IndexExpr comparisons, combined with &, |, ~; a loop-index
    :class:`~.symbolic.Predicate` combines as its concrete value)."""

    __slots__ = ("v",)
    __array_priority__ = 100
    LEVEL = 0

    def __init__(self, v: Any):
        self.v = np.asarray(v, dtype=bool)

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        # ERR err_cannot_assign_to_index (SDK 2.26 nki.errors.rst): nor does a mask
        raise NKISyntaxError(
            "E014",
            "mask",
            None,
            "'mask' tensor does not support item assignment (ERR err_cannot_assign_to_index)",
            "Build a new predicate from index comparisons combined with &, | and ~",
        )

    def _b(self, o, f):
        m = _mask_operand(o)
        if m is None:
            return NotImplemented
        return _MASK[max(self.LEVEL, m[1])](f(self.v, m[0]))

    __and__ = lambda s, o: s._b(o, np.logical_and)
    __rand__ = lambda s, o: s._b(o, np.logical_and)
    __or__ = lambda s, o: s._b(o, np.logical_or)
    __ror__ = lambda s, o: s._b(o, np.logical_or)
    __invert__ = lambda s: s.__class__(~s.v)

    def __bool__(self) -> bool:
        f = sys._getframe(1)
        if not f.f_code.co_filename.startswith(_SIM_DIR) and control_flow_site(f) in ("if", "while", "jump"):
            # ERR err_control_flow_condition_depending_on_arange (SDK 2.26 nki.errors.rst): an `if` (or
            # `while`, conditional expression) on an nl.arange / nl.mgrid predicate
            raise SimValueError(
                "E015",
                "if",
                None,
                "control flow depending on nl.arange / nl.mgrid is not "
                "supported (err_control_flow_condition_depending_on_arange)",
                "Pass the predicate as mask= to the instructions instead of branching on it",
            )
        # `m1 and m2` traces in real NKI 0.1 as Python's `and`: m1 is truthy, the result is m2
        # (SDK nki/test test_nki_isa_nc_match_replace8 passes `mask=(ix < a and iy < b)` and its
        # golden value matches the second predicate alone; the known-issues doc says `and` is
        # not supported for masks).  Accept it, with a warning (an error under strict).
        unproven(
            "ki.mask_and",
            "`and`/`or`/`if` on an NKI mask expression evaluates the mask as True "
            "(Python semantics: `m1 and m2` is m2 alone); combine predicates with &",
        )
        return True

    def __repr__(self) -> str:
        return f"MaskExpr(shape={self.v.shape}, true={int(self.v.sum())})"


class IterMaskExpr(MaskExpr):
    """A mask built from an :class:`IterIndexExpr` (the lenient rule pm.mask_loop_index_nonaffine in ``mask=``)."""

    __slots__ = ()
    LEVEL = 1


class NonAffineMaskExpr(MaskExpr):
    """A mask built from a non-affine index expression (rejected by ``mask=``, E015)."""

    __slots__ = ()
    LEVEL = 2


_INDEX = (IndexExpr, IterIndexExpr, NonAffineIndexExpr)
_MASK = (MaskExpr, IterMaskExpr, NonAffineMaskExpr)


def _mask_level(mask: MaskExpr, api: str) -> None:
    """E015 for a mask that is not affine in its aranges; the lenient rule for one whose only non-affine part is a
    loop-index term.  ERR err_unsupported_expression_in_mask (SDK 2.26 nki.errors.rst) shows `i % 4` of a loop
    index as a whole mask failing (kept an error: a loop-index Predicate); a CS149 solution that ran on hardware
    masked a store with `//` of an affine_range index next to its aranges, which is a constant in each iteration
    once the backend unrolls the loop."""
    if mask.LEVEL == 2:
        raise_nonaffine_mask(api)
    if mask.LEVEL == 1:
        lenient(
            "pm.mask_loop_index_nonaffine",
            f"the mask of {api} combines nl.arange indices with a non-affine term of a loop index (`//`, `%` or "
            "a product of loop indices); the errors page's err_unsupported_expression_in_mask rejects non-affine "
            "mask expressions",
            "Make the loop-index term affine (split the loop, or iterate over the quotient and remainder as two loops)",
            op=api,
            arg="mask",
        )


class MGrid:
    """Result of ``nl.mgrid[0:P, 0:F, ...]``: unpackable, with fields .p .x .y .z, usable as index."""

    __slots__ = ("parts",)

    def __init__(self, parts: Iterable[Any]):
        parts = [np.asarray(p) for p in parts]
        grid = tuple(np.broadcast_shapes(*(p.shape for p in parts))) if parts else ()
        self.parts = tuple(IndexExpr(p, grid or True) for p in parts)

    def __iter__(self) -> Iterator[IndexExpr]:
        return iter(self.parts)

    def __len__(self) -> int:
        return len(self.parts)

    def __getitem__(self, i: int) -> IndexExpr:
        return self.parts[i]

    p = property(lambda s: s.parts[0])
    x = property(lambda s: s.parts[1])
    y = property(lambda s: s.parts[2])
    z = property(lambda s: s.parts[3])


class _MGridMaker:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        for s in key:
            if not isinstance(s, slice) or s.step not in (None, 1):
                raise NKISyntaxError(
                    "E014", "mgrid", None, f"mgrid expects unit-step slices, got {s!r}", "Write nl.mgrid[0:P, 0:F]"
                )
        return MGrid(np.ogrid[key])


def mask_value(mask: Any, api: str = "mask") -> bool | np.ndarray | None:
    """``mask=`` of an NKI 0.1 call as the core takes it: None, a bool, or the predicate's bool array
    (broadcast to the instruction's shape by the core)."""
    if mask is None or mask is True or mask is False:
        return mask
    if isinstance(mask, (bool, np.bool_)):
        return bool(mask)
    if mask.__class__ is MaskExpr:
        return mask.v
    if mask.__class__ is Predicate:
        # a predicate of loop indices alone: the instruction runs (entirely) in the iterations where it holds
        if not mask.affine:
            raise_nonaffine_mask(api)
        return mask.v
    if isinstance(mask, MaskExpr):
        _mask_level(mask, api)
        return mask.v
    raise SimValueError(
        "E015",
        api,
        "mask",
        f"mask must be an affine predicate (MaskExpr) or a bool, got {type(mask).__name__}",
        "Build it from nl.arange/mgrid comparisons combined with &",
    )


@overload
def mask_array(mask: MaskExpr, shape: tuple[int, ...], api: str = ...) -> np.ndarray: ...
@overload
def mask_array(mask: Any, shape: tuple[int, ...], api: str = ...) -> bool | np.ndarray | None: ...


def mask_array(mask: Any, shape: tuple[int, ...], api: str = "mask") -> bool | np.ndarray | None:
    """Evaluate ``mask=`` for an output of ``shape``: None (all), a bool, or a bool array."""
    if mask is None:
        return None
    if isinstance(mask, (bool, np.bool_)):
        return bool(mask)
    if mask.__class__ is Predicate:
        if not mask.affine:
            raise_nonaffine_mask(api)
        return mask.v
    if isinstance(mask, MaskExpr):
        _mask_level(mask, api)
        m = mask.v
        if m.ndim < len(shape):
            m = m.reshape(m.shape + (1,) * (len(shape) - m.ndim))
        try:
            return np.broadcast_to(m, shape)
        except ValueError:
            raise SimValueError(
                "E011",
                api,
                "mask",
                f"mask of shape {mask.v.shape} does not broadcast to the instruction's shape {tuple(shape)}",
                "Build the mask from the same aranges that index the operands",
            ) from None
    raise SimValueError(
        "E015",
        api,
        "mask",
        f"mask must be an affine predicate (MaskExpr) or a bool, got {type(mask).__name__}",
        "Build it from nl.arange/mgrid comparisons combined with &",
    )
