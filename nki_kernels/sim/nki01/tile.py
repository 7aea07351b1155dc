"""The NKI 0.1 tensor: :class:`Tile`, the core :class:`~..core.tensor.Tensor` with NKI 0.1's indexing
syntax (``nl.arange`` / ``nl.mgrid`` index expressions, predicates, index tiles), assignment,
``+=``, and the tile operators (spec §3, §4, §10).

Index expressions are evaluated here into the integer index arrays the core's views take.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from ..core import dtypes as dt
from ..core import ops as core
from ..core.context import enter, enter_landing, maybe_current, unproven
from ..core.errors import NKISyntaxError, SimIndexError, SimNotImplementedError, SimTypeError, SimValueError, user_frame
from ..core.indirect import IndirectTensor, indirect_view
from ..core.tensor import HBM_KINDS, Tensor
from ..kernel_ast import control_flow_site
from .indexing import IndexExpr, MaskExpr, MGrid, mask_array
from .symbolic import Index, Predicate, index_use, slice_extent

# the nl.* functions the tile operators call (bound by language.py when it is imported)
NL: dict = {}


class ParDim(int):
    """``nl.par_dim(n)``: marks the partition axis; axes before it are (deprecated) block dims."""


_ALL = slice(None)
_INTS = (int, type(None))  # slice bounds the recorder notes as written (Recorder.subscript)


def _nested(name: str) -> None:
    # CS149 course tips (asst4-trainium2 README): "Do not use nested slicing/mgrid
    # (e.g. t[0:128, 128:256][0:64, 0:64])" -- legal on paper, trouble in practice
    unproven(
        "ki.nested_slice",
        f"indexing `{name}` again after slicing it (slice of a slice) is "
        "hardware-unproven (CS149 tips: do not use nested slicing/mgrid); index the original "
        "tensor once with the combined range",
    )


class Tile(Tensor):
    """An NKI 0.1 tensor / tile view.  ``.shape .dtype .ndim .itemsize .buffer .name``."""

    __slots__ = ()
    __array_priority__ = 100
    # set after the class from the nl.* table (with the binary and comparison operators)
    __neg__: Callable[[Tile], Any]
    __invert__: Callable[[Tile], Any]
    __abs__: Callable[[Tile], Any]

    def __bool__(self) -> bool:
        # ERR err_ambiguous_tensor_truth_value / err_dynamic_control_flow_not_supported (SDK 2.26
        # nki.errors.rst): `if t:`, `not t`, `t and u` on a tile; on an HBM tensor (a kernel parameter)
        # the `if`/`elif` statement (the page's own example is `if b:` on an optional tensor parameter).
        # A conditional expression on an HBM parameter is truthy: the SDK's golden test
        # test_nki_isa_tensor_scalar_cumulative writes `nl.load(imm1[...]) if imm1 else None`
        # (aws-neuron-sdk@81ce03ae nki/test/test_nki_isa_tensor_scalar_cumulative.py; README divergences)
        hbm = self.alloc.buffer in HBM_KINDS
        if hbm:
            f = user_frame()
            if f is None or control_flow_site(f) != "if":
                return True
        where = "an HBM tensor" if hbm else "a tile"
        raise SimValueError(
            "E015",
            "tensor",
            self.name,
            f"the truth value of {where} is ambiguous (err_ambiguous_tensor_truth_value; "
            "control flow cannot depend on tensor values)",
            "Test an optional tensor with `is not None`; use mask= or nl.where (and &, |, ~ "
            "instead of and/or/not) for element values",
        )

    __hash__ = object.__hash__

    def __iter__(self) -> NoReturn:
        raise SimTypeError(
            "E010", "iter", self.name, "NKI tensors are not iterable", "Index them with slices or nl.arange"
        )

    # -- indexing ---------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tile | IndirectTensor:
        key = key if key.__class__ is tuple else (key,)
        if (
            len(key) == 1
            and len(self._shape) == 2
            and key[0] is not Ellipsis
            and 1 in self._shape
            and self.alloc.buffer not in HBM_KINDS
        ):
            # KI (SDK 2.26 nki_known_issues.rst "Indexing"): [N, 1] / [1, M] buffers are indexed with both
            # indices (my_sbuf[0:N, 0]); a single index "won't work"
            raise NKISyntaxError(
                "E014",
                "index",
                self.name,
                f"a {list(self._shape)} on-chip tile indexed with one index: index both axes",
                "Write t[0:N, 0] for an [N, 1] tile or t[0, 0:M] for a [1, M] tile",
            )
        basic = None  # the common case: ints, slices and ``...`` only, loop indices read as their values
        ctx = maybe_current()
        # a loop body being traced (core/program.py): the elements an int subscript takes, for the bounds at the last
        # iteration (an unrolled loop's index is an int; a symbolic one notes itself: index_use)
        rec = ctx.recorder if ctx is not None else None
        for i, k in enumerate(key):
            c = k.__class__
            if k is Ellipsis:
                continue
            if c is int:
                if rec is not None and i < len(self._shape):
                    rec.subscript(self._shape[i], k, k + 1)
                continue
            if c is slice:
                if (
                    rec is not None
                    and i < len(self._shape)
                    and k.start.__class__ in _INTS
                    and k.stop.__class__ in _INTS
                ):
                    n = self._shape[i]
                    rec.subscript(n, 0 if k.start is None else k.start, n if k.stop is None else k.stop)
                if k.start.__class__ is Index or k.stop.__class__ is Index or k.step.__class__ is Index:
                    # a loop index bounding a slice is its concrete value (docs/nki-0.1-rules.md section 9); the
                    # extent must not depend on it (a tile's shape is a trace-time int)
                    slice_extent(k, self.name)
                    index_use(self._shape[i] if i < len(self._shape) else 0, k)
                    basic = basic or list(key)
                    basic[i] = slice(*(b.v if b.__class__ is Index else b for b in (k.start, k.stop, k.step)))
                continue
            if c is Index:
                index_use(self._shape[i] if i < len(self._shape) else 0, k)
                basic = basic or list(key)
                basic[i] = k.v
                continue
            break
        else:
            if basic is not None:
                key = tuple(basic)
            if self.sliced and any(k.__class__ is slice and k != _ALL for k in key):
                _nested(self.name)
            return self.index(key)
        flat = []
        for k in key:
            c = k.__class__
            if c is Index:
                # a loop index is a basic (scalar) index: its concrete value (docs/nki-0.1-rules.md §9)
                index_use(-1, k)  # checked as part of the index-array view by a loop program
                flat.append(k.v)
            elif c is Predicate:
                flat.append(MaskExpr(k.v))
            elif isinstance(k, MGrid):
                flat.extend(k.parts)
            else:
                if isinstance(k, IndexExpr) and k.LEVEL:
                    index_use(-1, k)  # an expression not affine in the loop indices (or in the aranges)
                flat.append(k)
        if any(isinstance(k, Tensor) for k in flat):
            view = indirect_view(self, [k.v if isinstance(k, IndexExpr) else k for k in flat])
            # nl.load / nl.store reject it (checked there): KI "nl.mgrid won't work" for indirect load/store
            view.from_mgrid = any(isinstance(k, IndexExpr) and k.mgrid for k in flat)
            return view
        advanced = any(isinstance(k, IndexExpr) for k in flat)
        if self.sliced and any(isinstance(k, IndexExpr) or isinstance(k, slice) and k != _ALL for k in flat):
            _nested(self.name)
        if len(flat) == 1 and isinstance(flat[0], MaskExpr):
            # ``tile[pred]`` with a boolean affine expression: the whole tile, accessed only where
            # ``pred`` holds (decision, README divergences: the 2.26 docs do not define this form; it
            # reads as the mask= predicate attached to the access)
            return self.where_view(mask_array(flat[0], self._shape, "index"))
        if self.arr is None and advanced:
            raise SimNotImplementedError(
                "E100",
                "index",
                self.name,
                "indexing a view that was itself indexed with nl.arange/mgrid "
                "again with nl.arange/mgrid is not implemented in nki_kernels.sim",
                "Index the original tensor once with the combined expression",
            )
        if advanced:
            return self.take(self._index_arrays(flat))
        return self.index(flat)

    def _index_arrays(self, key):
        """The core index arrays of an nl.arange/mgrid key (E014 for the forms NKI 0.1 rejects)."""
        if len(key) != len(self._shape):
            if any(isinstance(k, slice) or k is Ellipsis for k in key):
                raise NKISyntaxError(
                    "E014",
                    "index",
                    self.name,
                    "Mixing basic tensor indexing and advanced tensor indexing is not supported",
                    "Index every axis with nl.arange/mgrid expressions (or ints)",
                )
            raise SimIndexError(
                "E008",
                "index",
                self.name,
                f"{len(key)} indices for a tensor of rank {len(self._shape)}",
                "Index every axis with nl.arange/mgrid expressions or ints",
            )
        parts = []
        for k in key:
            if isinstance(k, IndexExpr):
                if k.ndim == 1 and len(key) > 1:
                    raise NKISyntaxError(
                        "E014",
                        "index",
                        self.name,
                        f"{self.name} with 1d arange is not supported",
                        "Lift it: nl.arange(n)[:, None] for the partition axis, nl.arange(n)[None, :] for a free axis",
                    )
                parts.append(k.v)
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                parts.append(int(k))
            elif isinstance(k, slice) or k is Ellipsis:
                raise NKISyntaxError(
                    "E014",
                    "index",
                    self.name,
                    "Mixing basic tensor indexing and advanced tensor indexing is not supported",
                    "Use nl.arange for every axis, or slices for every axis",
                )
            else:
                raise SimIndexError("E008", "index", self.name, f"unsupported index {k!r}")
        return parts

    def __setitem__(self, key: Any, value: Any) -> None:
        dst = self[key]
        ctx = enter_landing("dst[...] = value")
        core.assign(ctx, dst, value, api="dst[...] = value")

    # -- views ------------------------------------------------------------------------------
    def reshape(self, *shape: Any, **kw: Any) -> Tile:
        if "shape" in kw:
            shape = (kw.pop("shape"),)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self.reshape_view(tuple(int(s) for s in shape))

    def view(self, dtype: Any) -> Tile:
        d = dt.canonical(dtype, op="view")
        if dt.itemsize(d) != self.itemsize or self.arr is None:
            raise SimValueError(
                "E018",
                "view",
                self.name,
                "view() needs a dtype of the same size",
                f"{dt.name_of(self.dtype)} is {self.itemsize} bytes",
            )
        ctx = enter("view", instruction=False)
        t = self.reinterpret(self.arr.view(dt.storage_dtype(d, ctx.options.precision)), d, name=self.name + "_view")
        t.alloc.written = True
        return t

    def astype(self, dtype: Any) -> Tile:
        return NL["copy"](self, dtype=dtype)

    def broadcast_to(self, shape: tuple[int, ...]) -> Tile:
        return NL["broadcast_to"](self, shape=shape)

    def expand_dims(self, axis: int | tuple[int, ...]) -> Tile:
        return NL["expand_dims"](self, axis)

    def assert_shape(self, shape: tuple[int, ...]) -> Tile:
        if tuple(shape) != self._shape:
            raise SimValueError(
                "E011",
                "assert_shape",
                self.name,
                f"unexpected shape for {self.name}, expected {tuple(shape)}, got {self._shape}",
            )
        return self

    # -- arithmetic operators map to nl.* (spec §10) ------------------------------------
    def __iadd__(self, other: Any) -> Tile:
        return core.accumulate(enter_landing("+="), self, other, "add")

    def __isub__(self, other: Any) -> Tile:
        return core.accumulate(enter_landing("-="), self, other, "subtract")

    def __imul__(self, other: Any) -> Tile:
        return core.accumulate(enter_landing("*="), self, other, "multiply")

    def __itruediv__(self, other: Any) -> Tile:
        return core.accumulate(enter_landing("/="), self, other, "divide")


def _binop(name, reverse=False):
    def f(self, other):
        fn = NL[name]
        if isinstance(other, Tensor) and other._shape and self._shape and other._shape[0] != self._shape[0]:
            # KI (SDK 2.26 nki_known_issues.rst): "Partition dimension broadcasting is not supported on
            # operator overloads" -- nl.add(a, b) and friends do broadcast
            raise SimValueError(
                "E002",
                f"operator {name}",
                None,
                f"partition-dimension broadcasting through an operator: {self._shape} and "
                f"{other._shape} have different partition counts",
                f"Call nl.{name}(a, b), which broadcasts a 1-partition operand, or "
                "broadcast it first (nl.broadcast_to)",
                got=(self._shape[0], other._shape[0]),
            )
        return fn(other, self) if reverse else fn(self, other)

    f.__name__ = name
    return f


# NKI 0.1 also maps `//` (nl.floor_divide)
for _n, _op in (*core.OPERATOR_BINARY, ("floordiv", "floor_divide")):
    setattr(Tile, f"__{_n}__", _binop(_op))
    setattr(Tile, f"__r{_n}__", _binop(_op, reverse=True))
for _n, _op in core.OPERATOR_COMPARE:
    setattr(Tile, f"__{_n}__", _binop(_op))
Tile.__neg__ = lambda s: NL["negative"](s)
Tile.__invert__ = lambda s: NL["invert"](s)
Tile.__abs__ = lambda s: NL["abs"](s)
