"""``nki.language.NkiTensor``: the NKI 0.6/0.7 tensor view (docs/nki-0.7-spec.md §2, §3).

An :class:`NkiTensor` wraps one core tensor view (``.t``, a NumPy view of an allocation's
storage), so every view shares storage and every instruction sees the same allocation ids,
byte regions, poison and capacity accounting as the NKI 0.1 front end.  Indexing follows rule
V1 (on chip an int on the partition axis keeps a size-1 axis; results stay >= 2-D), views
follow V3 and access patterns V4.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, overload

import numpy as np

from ..core import dtypes as dt
from ..core import ops as core
from ..core.context import current, enter_landing, lenient, maybe_current
from ..core.errors import (
    NKISyntaxError,
    SimIndexError,
    SimNotImplementedError,
    SimTypeError,
    SimValueError,
    not_implemented,
    user_frame,
)
from ..core.indirect import DynamicAddressView, OutOfBoundsView
from ..core.tensor import ON_CHIP, Tensor
from ..kernel_ast import control_flow_site
from .scalar import INT64, NkiScalar, value_of

# the nl.* functions the tensor operators call (bound by language.py when it is imported)
NL: dict = {}


class MemoryRegion(str, enum.Enum):
    """``nl.sbuf``, ``nl.psum``, ``nl.hbm``, ``nl.private_hbm``, ``nl.shared_hbm`` (NKI 0.6 T2)."""

    sbuf = "sbuf"
    psum = "psum"
    hbm = "hbm"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __repr__(self) -> str:
        return f"nl.{self.value}"

    __str__ = __repr__


REGIONS = {r.value: r for r in MemoryRegion}


def _int_of(x, api, arg):
    """An index given as int, NumPy int, register, NkiScalar or a (1, 1) SBUF tensor (read now)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if hasattr(x, "__nki_register__") or isinstance(x, NkiScalar):
        return value_of(x, api)
    if isinstance(x, NkiTensor):
        if x.t.size != 1:
            raise SimIndexError(
                "E008",
                api,
                arg,
                f"a dynamic index must be a single value, got shape {x.shape}",
                "Use a (1, 1) int32 tensor",
            )
        return int(np.asarray(x.t.read()).reshape(-1)[0])
    raise SimIndexError("E008", api, arg, f"expected an integer index, got {type(x).__name__}")


class DynSlice:
    """``nl.ds(start, size)``: ``start:start+size`` (start may be a register)."""

    __slots__ = ("start", "size", "step")

    def __init__(self, start: Any, size: int, step: int = 1):
        self.start, self.size, self.step = start, size, step

    def as_slice(self) -> slice:
        s = _int_of(self.start, "ds", "start")
        n = int(self.size)
        return slice(s, s + n * self.step, self.step)


class Shape(tuple):
    """A tensor shape: a tuple that also compares equal to a list (``assert A.shape == [512, 512]``
    appears in the NKI migration guide)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__


class NkiTensor:
    """A view of an HBM, SBUF or PSUM allocation.  On chip, axis 0 is the partition axis."""

    __slots__ = ("t", "__weakref__")
    __array_priority__ = 100
    # set after the class from the nl.* table (with the binary and comparison operators)
    __neg__: Callable[[NkiTensor], Any]
    __abs__: Callable[[NkiTensor], Any]
    __invert__: Callable[[NkiTensor], Any]

    def __init__(self, t: Tensor):
        self.t = t

    # ---- metadata (T5) -------------------------------------------------------------------
    shape = property(lambda s: Shape(s.t._shape))
    dtype = property(lambda s: s.t.alloc.dtype)
    ndim = property(lambda s: len(s.t.shape))
    size = property(lambda s: s.t.size)
    itemsize = property(lambda s: s.t.alloc.itemsize)
    name = property(lambda s: s.t.alloc.name)

    @property
    def buffer(self) -> MemoryRegion:
        return REGIONS[self.t.alloc.buffer.value]

    @property
    def strides(self) -> tuple[int, ...]:
        a = self._need_basic("strides")
        return tuple(s // a.itemsize for s in a.strides)

    @property
    def offset(self) -> int:
        return self.t.off // self.t.alloc.array.itemsize

    def is_contiguous(self) -> bool:
        a = self._need_basic("is_contiguous")
        exp = 1
        dims = list(zip(a.shape, self.strides, strict=False))
        if self.t.alloc.buffer in ON_CHIP:
            dims = dims[1:]
        for n, s in reversed(dims):
            if n == 1:
                continue
            if s != exp:
                return False
            exp *= n
        return True

    def get_pattern(self) -> list[list[int]]:
        return [[s, n] for s, n in zip(self.strides, self.shape, strict=False)]

    def is_indirect(self) -> bool:
        return self.t.arr is None

    def __repr__(self) -> str:
        return (
            f"NkiTensor({self.name}, shape={self.shape}, dtype={dt.name_of(self.dtype)}, buffer={self.t.alloc.buffer})"
        )

    def __len__(self) -> int:
        return self.t.shape[0]

    def __iter__(self) -> NoReturn:
        raise SimTypeError("E010", "iter", self.name, "NKI tensors are not iterable", "Index them with slices or nl.ds")

    def __bool__(self) -> bool:
        f = user_frame()
        if f is not None and control_flow_site(f) == "if":
            # LG "Compilation Model" (aws-neuron-sdk 81ce03ae nki/get-started/nki-language-guide.rst): the compiler
            # resolves if-statements at specialization time, where a tensor is an object, not values: the test is
            # true.  Public code that ran relies on it: nki-library (d2ad3a5) mlp_tkg_constants.py
            # `if params.expert_params and params.expert_params.expert_index:` asks "is there an index tensor"
            # (its contents hold zeros; read as contents, MoE TKG lost its top-k and crashed).  Decision: true, a
            # SimWarning (the branch never depends on the data), E015 under strict.
            what = (
                f"`if` on tensor `{self.name}`: the NKI compiler resolves if-statements at specialization time, "
                "where a tensor is an object (true), never its contents"
            )
            fix = (
                "Branch on a Python bool saying whether the tensor is given (`is not None` is not NKI 0.3+); to branch "
                "on values, compute both sides and select "
                "(nisa.select / affine_select) or load a register (nisa.register_load) for runtime control flow"
            )
            lenient("nki07.if_tensor", what, fix, op="if", arg=self.name)
            return True
        # Decision (spec "Decisions"): docstring examples write `assert nl.equal(c, expected)`: the contents
        return bool(np.all(np.asarray(self.t.read()) != 0))

    __hash__ = object.__hash__

    def _onchip(self):
        return self.t.alloc.buffer in ON_CHIP

    def _need_basic(self, api: str) -> np.ndarray:
        if self.t.arr is None:
            raise SimNotImplementedError(
                "E100",
                api,
                self.name,
                "a view of an indirect (vector_offset) access pattern is not implemented in nki_kernels.sim",
                "Apply the view before .ap()",
            )
        return self.t.arr

    def _indirect_again(self, api):
        # LG "Querying layout" (aws-neuron-sdk 81ce03ae nki/get-started/nki-language-guide.rst): once a view is
        # indirect, the indirected dimension cannot be sliced or selected again; deep dive nki-aps.rst: only one
        # dynamic select is allowed per tensor
        raise NKISyntaxError(
            "E014",
            api,
            self.name,
            "this view is indirect (vector_offset / vector_select): its "
            "indirected dimension 0 cannot be sliced or selected again, and a tensor takes only one "
            "dynamic select",
            "Slice or select the base tensor first, then apply the dynamic "
            "select last (is_indirect() tells the two apart)",
        )

    def _new(self, arr) -> NkiTensor:
        return NkiTensor(self.t.view_of(arr))

    # ---- indexing (V1) ---------------------------------------------------------------------
    def __getitem__(self, key: Any) -> NkiTensor:
        t = self.t
        arr = t.arr
        if key.__class__ is not tuple:
            key = (key,)
        for k in key:
            if isinstance(k, NkiTensor):
                # MIG (aws-neuron-sdk 81ce03ae nki/migration/index.rst "Dynamic access pattern"): the NKI 0.1 form
                # `A[idx_tile, i_p, i_f]` became .ap(scalar_offset=/vector_offset=) (and select/vector_select)
                raise NKISyntaxError(
                    "E014",
                    "index",
                    self.name,
                    f"a tensor ({k.name}) used as an index: NKI 0.2+ "
                    "has no tensor subscripts (the 0.1 dynamic access syntax changed)",
                    "Use .vector_select(0, offsets) / .ap(pattern, vector_offset=offsets) for one "
                    "row per partition, .ap(pattern, scalar_offset=reg_or_1x1_tile) for one offset",
                )
        if arr is None:
            k0 = key[0] if key else slice(None)
            if not (k0.__class__ is slice and k0 == slice(None)) and k0 is not Ellipsis:
                self._indirect_again("index")
            arr = self._need_basic("index")  # raises: an indirect view has no basic array
        shape = t._shape
        nd = len(shape)
        if any(k is Ellipsis for k in key):  # not `in`: it would call NkiTensor.__eq__
            dots = [j for j, k in enumerate(key) if k is Ellipsis]
            if len(dots) > 1:
                raise SimIndexError("E008", "index", self.name, "only one '...' is allowed in an index")
            i = dots[0]
            key = key[:i] + (slice(None),) * (nd - len(key) + 1) + key[i + 1 :]
        if len(key) > nd:
            raise SimIndexError(
                "E008",
                "index",
                self.name,
                f"too many indices: {len(key)} for a tensor of rank {nd}",
                f"{self.name} has shape {shape}",
            )
        onchip = t.alloc.buffer in ON_CHIP
        npkey: list[slice | int] = []
        strides = arr.strides
        off = t.off
        ctx = maybe_current()
        # a loop body being traced (core/program.py): every subscript's elements, for the bounds at the last iteration
        rec = ctx.recorder if ctx is not None else None
        for axis, k in enumerate(key):
            n = shape[axis]
            if k.__class__ is DynSlice:
                k = k.as_slice()
            if k.__class__ is slice:
                if k.start is None and k.stop is None and k.step is None:
                    npkey.append(k)
                    continue
                step = 1 if k.step is None else int(k.step)
                if step < 1:
                    raise SimIndexError("E008", "index", self.name, f"slice step must be >= 1, got {step}")
                # (an int is taken as is: the name in a message is formatted only when one is raised)
                start = k.start
                if start is None:
                    start = 0
                elif start.__class__ is not int:
                    start = _int_of(start, "index", self.name)
                stop = k.stop
                if stop is None:
                    stop = n
                elif stop.__class__ is not int:
                    stop = _int_of(stop, "index", self.name)
                if rec is not None:
                    rec.subscript(n, start, stop)
                if start < 0:
                    start += n
                if stop < 0:
                    stop += n
                if start < 0 or start > n or stop > n:
                    raise self._oob(axis, start, max(stop - 1, start), n)
                npkey.append(slice(start, max(stop, start), step))
                if start < n:
                    off += start * strides[axis]
            elif isinstance(k, (slice, DynSlice)):  # pragma: no cover - subclasses
                raise SimIndexError("E008", "index", self.name, f"unsupported slice {k!r}")
            elif k is None:
                raise SimIndexError(
                    "E008", "index", self.name, "None/np.newaxis is not a valid NKI index", "Use .expand_dim(dim)"
                )
            else:
                i = k if k.__class__ is int else _int_of(k, "index", self.name)
                if rec is not None:
                    rec.subscript(n, i, i + 1)
                if i < -n or i >= n:
                    raise self._oob(axis, i, i, n)
                if i < 0:
                    i += n
                npkey.append(slice(i, i + 1) if (onchip and axis == 0) else i)
                off += i * strides[axis]
        v = arr[tuple(npkey)]
        if onchip:
            if v.ndim < 2:
                v = v.reshape(v.shape + (1,) * (2 - v.ndim))
        elif v.ndim == 0:
            v = v.reshape(1)
        return NkiTensor(Tensor(t.alloc, arr=v, par=0 if onchip else None, off=off))

    def _oob(self, axis, lo, hi, n):
        return SimIndexError(
            "E008",
            "index",
            self.name,
            f"Out-of-bound access for tensor `{self.name}` on dimension {axis}: index range [{lo}, {hi}] "
            f"exceed dimension size of {n}",
            "NKI does not clamp slices: fix the range (sizes are in .shape)",
        )

    def __setitem__(self, key: Any, value: Any) -> None:
        dst = self[key]
        ctx = enter_landing("dst[...] = value")
        core.assign(ctx, dst.t, value.t if isinstance(value, NkiTensor) else value, api="dst[...] = value")

    # ---- views (V3) ------------------------------------------------------------------------
    def _dim(self, d, api, allow_partition=False, extra=0):
        nd = self.ndim + extra
        if not isinstance(d, (int, np.integer)) or not -nd <= d < nd:
            raise SimIndexError("E008", api, "dim", f"dimension {d} out of range for rank {self.ndim}")
        d = int(d) % nd
        if d == 0 and not allow_partition and self._onchip():
            raise SimValueError(
                "E026",
                api,
                "dim",
                "the partition dimension (0) of an on-chip tensor cannot be changed by this view",
                "Apply it to a free dimension (>= 1)",
            )
        return d

    def permute(self, dims: Sequence[int]) -> NkiTensor:
        dims = tuple(int(d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise SimValueError("E011", "permute", "dims", f"{dims} is not a permutation of range({self.ndim})")
        if self._onchip() and dims[0] != 0:
            raise SimValueError(
                "E026",
                "permute",
                "dims",
                f"on-chip tensors keep the partition dim first (dims[0] must be 0), got {dims}",
            )
        return self._new(self._need_basic("permute").transpose(dims))

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        d = self._dim(dim, "broadcast")
        a = self._need_basic("broadcast")
        if a.shape[d] != 1:
            raise SimValueError("E011", "broadcast", "dim", f"dimension {d} has size {a.shape[d]}, not 1")
        shape = a.shape[:d] + (int(size),) + a.shape[d + 1 :]
        return self._new(np.lib.stride_tricks.as_strided(a, shape, a.strides[:d] + (0,) + a.strides[d + 1 :]))

    def expand_dim(self, dim: int) -> NkiTensor:
        d = self._dim(dim, "expand_dim", extra=1)
        a = self._need_basic("expand_dim")
        return self._new(np.expand_dims(a, d))

    def squeeze_dim(self, dim: int) -> NkiTensor:
        d = self._dim(dim, "squeeze_dim")
        a = self._need_basic("squeeze_dim")
        if a.shape[d] != 1:
            raise SimValueError("E011", "squeeze_dim", "dim", f"dimension {d} has size {a.shape[d]}, not 1")
        return self._new(np.squeeze(a, d))

    def reshape_dim(self, dim: int, shape: Sequence[int]) -> NkiTensor:
        d = self._dim(dim, "reshape_dim", allow_partition=True)
        shape = tuple(int(s) for s in shape)
        n = self.shape[d]
        if shape.count(-1) == 1:
            known = int(np.prod([s for s in shape if s != -1]))
            shape = tuple(n // known if s == -1 else s for s in shape)
        if int(np.prod(shape)) != n:
            raise SimValueError("E011", "reshape_dim", "shape", f"{shape} does not multiply to {n}")
        if d == 0 and self._onchip() and len([s for s in shape if s != 1]) > 1:
            raise SimValueError("E026", "reshape_dim", "dim", "the partition dimension cannot be split")
        return self.reshape(self.shape[:d] + shape + self.shape[d + 1 :])

    def flatten_dims(self, start_dim: int, end_dim: int) -> NkiTensor:
        s = self._dim(start_dim, "flatten_dims")
        e = self._dim(end_dim, "flatten_dims")
        if e < s:
            raise SimValueError("E011", "flatten_dims", "end_dim", f"end_dim {e} < start_dim {s}")
        shp = self.shape
        return self.reshape(shp[:s] + (int(np.prod(shp[s : e + 1])),) + shp[e + 1 :])

    @overload
    def reshape(self, shape: Sequence[int], /) -> NkiTensor: ...
    @overload
    def reshape(self, *shape: int) -> NkiTensor: ...

    def reshape(self, *shape: Any) -> NkiTensor:  # ints, or one sequence of them (the overloads)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if shape.count(-1) == 1:
            known = int(np.prod([s for s in shape if s != -1]))
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        a = self._need_basic("reshape")
        if int(np.prod(shape)) != a.size:
            raise SimValueError(
                "E011",
                "reshape",
                "shape",
                f"size mismatch: cannot reshape {self.shape} ({a.size} elements) to {shape}",
                "The element count must not change (NKI 0.5 validates it)",
            )
        if self._onchip() and (not shape or shape[0] != self.shape[0]):
            raise SimValueError(
                "E026",
                "reshape",
                "shape",
                f"an on-chip reshape keeps the partition dim ({self.shape[0]}), got {shape}",
                "Reshape only the free dims",
            )
        try:
            v = np.reshape(a, shape, copy=False)
        except ValueError:
            raise SimNotImplementedError(
                "E022",
                "reshape",
                "shape",
                f"non-contiguous layout: this {self.shape} view (strides "
                f"{self.strides}) cannot be seen as shape {shape}",
                "Reshape the whole tensor before slicing or permuting it",
            ) from None
        return self._new(v)

    def rearrange(
        self,
        src_pattern: Sequence[str | Sequence[str]],
        dst_pattern: Sequence[str | Sequence[str]],
        fixed_sizes: Mapping[str, int] | None = None,
    ) -> NkiTensor:
        fixed = dict(fixed_sizes or {})

        def names(p):
            return [x if isinstance(x, (tuple, list)) else (x,) for x in p]

        src, dst = names(src_pattern), names(dst_pattern)
        if len(src) != self.ndim:
            raise SimValueError("E011", "rearrange", "src_pattern", f"{len(src)} groups for rank {self.ndim}")
        sizes = {}
        for grp, n in zip(src, self.shape, strict=False):
            unknown = [x for x in grp if x not in fixed]
            known = int(np.prod([fixed[x] for x in grp if x in fixed])) if grp else 1
            if len(unknown) > 1:
                raise SimValueError("E011", "rearrange", "fixed_sizes", f"sizes of {unknown} are ambiguous")
            for x in grp:
                sizes[x] = fixed[x] if x in fixed else n // known
            if int(np.prod([sizes[x] for x in grp])) != n:
                raise SimValueError("E011", "rearrange", "fixed_sizes", f"group {grp} does not multiply to {n}")
        order = [x for grp in src for x in grp]
        flat_dst = [x for grp in dst for x in grp]
        if sorted(order) != sorted(flat_dst):
            raise SimValueError("E011", "rearrange", "dst_pattern", "src and dst name different dimensions")
        t = self.reshape(tuple(sizes[x] for x in order))
        t = t.permute(tuple(order.index(x) for x in flat_dst)) if order != flat_dst else t
        return t.reshape(tuple(int(np.prod([sizes[x] for x in grp])) for grp in dst))

    def slice(self, dim: int, start: Any, end: Any, step: int = 1) -> NkiTensor:
        d = self._dim(dim, "slice", allow_partition=True)
        key = [slice(None)] * self.ndim
        key[d] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index: Any) -> NkiTensor:
        d = self._dim(dim, "select", allow_partition=True)
        i = _int_of(index, "select", "index")
        key = [slice(None)] * self.ndim
        key[d] = i
        r = self[tuple(key)]
        if self._onchip() and d == 0:  # the size-1 partition slice stays; select removes a free dim only
            return r
        return r

    def vector_select(self, dim: int, vector_offset: NkiTensor) -> NkiTensor:
        if self.t.arr is None:
            self._indirect_again("vector_select")
        return self.ap(
            pattern=[[0, vector_offset.shape[0]]]
            + [[s, n] for s, n in zip(self.strides[1:], self.shape[1:], strict=False)],
            vector_offset=vector_offset,
            indirect_dim=dim,
        )

    def indirect(self, index: Any, num_elem: int | None = None) -> NoReturn:
        raise not_implemented("NkiTensor.indirect (tensor indirection, NeuronCore-v4)")

    def view(self, dtype: Any) -> NkiTensor:
        d = dt.canonical(dtype, op="view")
        a = self._need_basic("view")
        sd = dt.storage_dtype(d, current("view").options.precision)
        if a.ndim and a.strides[-1] != a.itemsize and a.shape[-1] != 1:
            raise SimNotImplementedError(
                "E022", "view", "dtype", "non-contiguous layout: the last dimension must be contiguous"
            )
        if d is self.dtype:
            return self
        try:
            v = a.view(sd)
        except ValueError as e:
            raise SimValueError(
                "E011",
                "view",
                "dtype",
                f"cannot reinterpret {self.shape} {dt.name_of(self.dtype)} as {dt.name_of(d)}: {e}",
            ) from None
        return NkiTensor(self.t.reinterpret(v, d))

    reinterpret_cast = view

    # ---- access patterns (V4) --------------------------------------------------------------
    def ap(
        self,
        pattern: Sequence[Sequence[int]] | None = None,
        offset: int | Sequence[int] | None = None,
        scalar_offset: Any = None,
        vector_offset: NkiTensor | Sequence[int] | None = None,
        indirect_dim: int = 0,
        dtype: Any = None,
        *more: Sequence[int],
    ) -> NkiTensor:
        api = "ap"
        t = self.t
        al = t.alloc
        if t.arr is None and (vector_offset is not None or scalar_offset is not None):
            self._indirect_again(api)
        if pattern is None:
            raise SimIndexError("E008", api, "pattern", "ap() needs pattern=[[stride, count], ...]")
        if _is_pair(pattern):
            # `t.ap([32, 16], [1, 32])` (the form of an example in the NKI access-pattern deep dive):
            # the [stride, count] pairs given as separate positional arguments
            pairs: list[Any] = [pattern]  # the pairs came as pattern, offset, ...: any positional argument
            rest = [offset, scalar_offset, vector_offset, dtype] + list(more)
            while rest and _is_pair(rest[0]):
                pairs.append(rest.pop(0))
            if any(r is not None for r in rest):
                raise SimIndexError(
                    "E008",
                    api,
                    "pattern",
                    "give the pattern as one list of [stride, count] pairs when passing other arguments",
                    "t.ap(pattern=[[s0, n0], [s1, n1]], ...)",
                )
            pattern, offset, scalar_offset, vector_offset, dtype = pairs, None, None, None, None
        try:
            pat = [(int(s), int(c)) for s, c in pattern]
        except (TypeError, ValueError):
            raise SimIndexError(
                "E008", api, "pattern", f"pattern must be [[stride, count], ...], got {pattern!r}"
            ) from None
        base = al.array
        if not base.flags.c_contiguous:  # pragma: no cover - allocations are contiguous
            raise SimNotImplementedError("E100", api, self.name, "ap() on a non-contiguous allocation")
        flat = base.reshape(-1)
        src_t = t
        if dtype is not None:
            d = dt.canonical(dtype, op=api)
            sd = dt.storage_dtype(d, current(api).options.precision)
            if d is not al.dtype:
                flat = flat.view(sd)
                src_t = t.reinterpret(flat, d)
        isz = flat.itemsize
        start = t.off // isz if t.arr is not None else t.off // base.itemsize
        if offset is not None:
            start += int(offset)  # type: ignore[arg-type]  # a pair in offset moved to pattern (above)
        if scalar_offset is not None:
            if isinstance(scalar_offset, NkiScalar) and scalar_offset.dtype == INT64 and al.buffer in ON_CHIP:
                # scalar_load page: "on an SBUF or PSUM operand the offset must be nl.int32" (a 64-bit offset is
                # rejected rather than silently narrowed); HBM takes either width
                raise SimTypeError(
                    "E009",
                    api,
                    "scalar_offset",
                    f"an nl.int64 NkiScalar offsets an access pattern of {al.buffer.value} tensor {self.name}: "
                    "on-chip offsets must be nl.int32",
                    "Load the offset from an nl.int32 tile (64-bit offsets address HBM only)",
                )
            # the offset counts along axis `indirect_dim` of this tensor (a reshaped view has its own strides:
            # vLLM-NKIPy's rank-slice add offsets a (ranks, rows, H) reshape of a (B, H) input by whole ranks)
            k = int(indirect_dim)
            shp = tuple(self.shape)
            if not 0 <= k < max(len(shp), 1):
                raise SimIndexError(
                    "E008", api, "indirect_dim", f"indirect_dim {k} is not an axis of {self.name}{list(shp)}"
                )
            if t.arr is not None and t.arr.ndim == len(shp):
                row = t.arr.strides[k] // isz
            else:
                row = int(np.prod(shp[k + 1 :])) if shp else 1
            start += _int_of(scalar_offset, api, "scalar_offset") * row
        counts = tuple(c for _, c in pat)
        strides = [s for s, _ in pat]
        lo = start + sum(min(0, s * (c - 1)) for s, c in pat)
        hi = start + sum(max(0, s * (c - 1)) for s, c in pat)
        if vector_offset is not None:
            if al.buffer in ON_CHIP:
                raise SimTypeError(
                    "E007",
                    api,
                    "vector_offset",
                    "vector indirection indexes an HBM tensor",
                    "Call .ap(vector_offset=...) on the HBM tensor",
                )
            if int(indirect_dim) != 0:
                raise SimNotImplementedError(
                    "E100",
                    api,
                    "indirect_dim",
                    "vector_offset with indirect_dim != 0 is not supported (NKI documents indirect_dim=0 only)",
                )
            if not isinstance(vector_offset, NkiTensor):
                raise SimTypeError("E010", api, "vector_offset", "vector_offset must be an SBUF (P, 1) tensor")
            rows = np.asarray(vector_offset.t.read()).reshape(-1).astype(np.int64)[: counts[0]]
            # a row of this tensor's axis 0 (of a reshaped view too, as for scalar_offset)
            shp = tuple(self.shape)
            if t.arr is not None and t.arr.ndim == len(shp) and shp:
                rstride = t.arr.strides[0] // isz
            else:
                rstride = int(np.prod(shp[1:])) if shp else 1
            idx = np.full(counts, start, dtype=np.int64)
            idx += (rows * rstride).reshape((-1,) + (1,) * (len(counts) - 1))
            for ax, (s, c) in enumerate(pat[1:], start=1):
                sh = [1] * len(counts)
                sh[ax] = c
                idx += (np.arange(c, dtype=np.int64) * s).reshape(sh)
            # a dynamic address, checked when the DMA runs (``oob_mode``): rows of -1 pad nki-library's MoE
            # token maps, gathered with oob_mode=skip (core/moe/moe_cte/bwmm_shard_on_block.py)
            return NkiTensor(_dynamic_view(src_t, flat, idx, vector_offset))
        if al.buffer in ON_CHIP and pat and pat[0][1] > 1 and al.row_bytes and pat[0][0] != al.row_bytes // isz:
            raise SimValueError(
                "E026",
                api,
                "pattern",
                f"on-chip access patterns step whole partitions: the first "
                f"[step, num] must have step {al.row_bytes // isz} (the free size), got {pat[0][0]}",
                "Give the partition dimension first, with step = elements per partition",
            )
        if lo < 0 or hi >= flat.size:
            what = (
                f"access pattern {pattern} at offset {start} reaches elements [{lo}, {hi}] "
                f"of a {flat.size}-element tensor"
            )
            return NkiTensor(_out_of_bounds_view(src_t, flat, start, pat, scalar_offset, self.name, what))
        v = np.lib.stride_tricks.as_strided(flat[start:], counts, [s * isz for s in strides])
        return NkiTensor(src_t.view_of(v))


def _out_of_bounds_view(
    t: Tensor, flat: np.ndarray, start: int, pat: list, scalar_offset: Any, name: str, what: str
) -> Tensor:
    """An access pattern that reaches outside its tensor is an error where an instruction uses it, not where it is
    written (core/indirect.py ``OutOfBoundsView``: nki-library builds views it then decides not to use).  With a
    runtime start (``scalar_offset``) the address is dynamic and checked when the DMA runs (aws-neuron-sdk 81ce03ae
    nki/api/nki/isa/__init__.py dma_copy: "out-of-bound address checking is turned on automatically during
    execution"; ``oob_mode=oob_mode.skip`` skips the out-of-bound transfers): ``DynamicAddressView``, whose
    out-of-bounds points the DMA drops under skip (nki-library core/subkernels/indexed_flatten.py offsets rows
    that belong to no expert far below 0)."""
    counts = tuple(c for _, c in pat)
    idx = np.full(counts, start, dtype=np.int64)
    for ax, (step, c) in enumerate(pat):
        sh = [1] * len(counts)
        sh[ax] = c
        idx += (np.arange(c, dtype=np.int64) * step).reshape(sh)
    if scalar_offset is None:
        oob = OutOfBoundsView(t.alloc, src=flat, key=(idx,), par=None, shape=counts, off=0)
        oob.arg, oob.message = name, what
        oob.index_tiles, oob.from_mgrid = (), False
        return oob
    return _dynamic_view(t, flat, idx, scalar_offset)


def _dynamic_view(t: Tensor, flat: np.ndarray, idx: np.ndarray, offsets: Any) -> Tensor:
    """The elements ``flat[idx]`` of an access pattern whose addresses come from a tile at run time
    (``scalar_offset`` / ``vector_offset``); out-of-bounds points are the DMA's to skip or reject."""
    out = DynamicAddressView(t.alloc, src=flat, key=(idx,), par=None, shape=idx.shape, off=0)
    out.index_tiles = (offsets.t,) if isinstance(offsets, NkiTensor) else ()
    out.from_mgrid = False
    return out


def _is_pair(x):
    return isinstance(x, (list, tuple)) and len(x) == 2 and all(isinstance(v, (int, np.integer)) for v in x)


# ---- operators map to nl.* ------------------------------------------------------------------
def _binop(name, reverse=False):
    def f(self, other):
        fn = NL[name]
        return fn(other, self) if reverse else fn(self, other)

    f.__name__ = name
    return f


for _n, _op in core.OPERATOR_BINARY:
    setattr(NkiTensor, f"__{_n}__", _binop(_op))
    setattr(NkiTensor, f"__r{_n}__", _binop(_op, reverse=True))
for _n, _op in core.OPERATOR_COMPARE:
    setattr(NkiTensor, f"__{_n}__", _binop(_op))
NkiTensor.__neg__ = lambda s: NL["negative"](s)
NkiTensor.__abs__ = lambda s: NL["abs"](s)
NkiTensor.__invert__ = lambda s: NL["invert"](s)


def wrap(t: Any) -> Any:
    """Core tensor -> NkiTensor (anything else unchanged)."""
    return NkiTensor(t) if isinstance(t, Tensor) else t


def unwrap(x: Any) -> Any:
    return x.t if isinstance(x, NkiTensor) else x
