"""Tensors and views of allocations, and the constructors of new tensors (spec §3, §4).

A :class:`Tensor` is a view of an :class:`~.memory.Alloc`:

* a *basic* view (ints, slices, ``...``) holds a NumPy view ``arr`` of the allocation's storage, so
  reads and writes go straight to memory;
* an *index-array* view holds the source view ``src`` and the index arrays ``key`` (ints or integer
  arrays, one per axis, broadcast together); it is resolved when an instruction reads or writes it,
  under the instruction's ``mask`` (masked-out points are never accessed, so out-of-bounds indices
  under a false mask are legal, spec §6).  A view may also carry a predicate (``_mask``): it is
  accessed only where the predicate holds.

The core knows only these two kinds of views.  Index expressions (NKI 0.1 ``nl.arange``/``nl.mgrid``,
masks) and access patterns (NKI 0.7 ``.ap``) are the front ends' business: they build the index
arrays.  On-chip (SBUF/PSUM) tensors remember which axis is the partition axis (``par``); a *tile*
is a view whose partition axis is axis 0.  HBM tensors have no partition axis.

Front ends subclass :class:`Tensor` for their user-facing API (operators, indexing syntax): views
keep the class of the tensor they are taken from, and new tensors get the class the run chose
(``RunContext``'s runner passes it to :func:`allocate` / :func:`fresh` / :func:`hbm_input`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dtypes as dt
from . import limits
from .context import RunContext, current, lenient, maybe_current
from .errors import (
    NKISyntaxError,
    SimIndexError,
    SimNotImplementedError,
    SimTypeError,
    SimValueError,
    partition_error,
    psum_bank_error,
)
from .memory import BUFFERS, BY_OTHER, Alloc
from .trace import Buffer, Region

if TYPE_CHECKING:
    from typing_extensions import Self

    from .dtypes import _TF32

SBUF, PSUM = Buffer.SBUF, Buffer.PSUM
ON_CHIP = (Buffer.SBUF, Buffer.PSUM)
HBM_KINDS = (Buffer.HBM, Buffer.SHARED_HBM, Buffer.PRIVATE_HBM)
_ALL = slice(None)


def _calling_api() -> str:
    """The NKI API the user called (the run's current call)."""
    ctx = maybe_current()
    if ctx is not None and ctx.api:
        return ctx.api
    return "an instruction"


class Tensor:
    """An NKI tensor / tile view.  ``.shape .dtype .ndim .itemsize .buffer .name``."""

    __slots__ = (
        "alloc",
        "arr",
        "par",
        "src",
        "key",
        "_shape",
        "off",
        "_mask",
        "sliced",
        "_region",
        "access_ok",
        "_race",
    )
    dynamic = False  # an indirect view (indices read from a tile at run time): core/indirect.py
    out_of_bounds = False  # an access pattern outside its tensor, an error where it is used: core/indirect.py

    def __init__(
        self,
        alloc: Alloc,
        arr: np.ndarray | None = None,
        par: int | None = None,
        src: np.ndarray | None = None,
        key: tuple | None = None,
        shape: Sequence[int] | None = None,
        off: int = 0,
    ):
        self.alloc = alloc
        self.off = off  # byte offset of this view's first element in the allocation
        self.arr = arr
        self.par = par
        self.src = src
        self.key = key
        if arr is not None:
            self._shape = arr.shape
        else:
            assert shape is not None, "an index-array view is given its shape"
            self._shape = tuple(shape)
        self._mask: np.ndarray | None = None  # a predicate of an index-array view: accessed only where it holds
        self.sliced = False  # made by indexing with a slice or index arrays (a view of a view)
        self._region: Region | None = None  # region() of this view (its geometry never changes)
        self.access_ok = False  # passed the engine operand access rules (ops.tile)
        self._race = None  # races._geometry() of this view, once computed (its geometry never changes)

    # -- metadata -------------------------------------------------------------------------
    shape = property(lambda s: s._shape)
    dtype = property(lambda s: s.alloc.dtype)
    ndim = property(lambda s: len(s._shape))
    itemsize = property(lambda s: s.alloc.itemsize)
    buffer = property(lambda s: s.alloc.buffer)
    name = property(lambda s: s.alloc.name)

    @property
    def size(self) -> int:
        if self.arr is not None:
            return self.arr.size
        n = 1
        for s in self._shape:
            n *= s
        return n

    def __len__(self) -> int:
        return self._shape[0]

    def __repr__(self) -> str:
        return (
            f"Tensor({self.alloc.name}, shape={self._shape}, dtype={dt.name_of(self.dtype)}, "
            f"buffer={self.alloc.buffer.value})"
        )

    __hash__ = object.__hash__

    @property
    def is_onchip(self) -> bool:
        return self.alloc.buffer in ON_CHIP

    # -- memory access ----------------------------------------------------------------------
    def _resolve(self, mask):
        """Index arrays for an advanced view under ``mask`` (masked-out points use index 0)."""
        idx = []
        m = None if mask is None or isinstance(mask, bool) else mask
        vm = self._mask
        if vm is not None and not isinstance(vm, bool):
            m = vm if m is None else (m & vm)
        for axis, k in enumerate(self.key):
            if isinstance(k, np.ndarray):
                kk = np.broadcast_to(k, self._shape)
                n = self.src.shape[axis]
                if m is not None:
                    kk = np.where(m, kk, 0)
                lo, hi = (int(kk.min()), int(kk.max())) if kk.size else (0, 0)
                if lo < 0 or hi >= n:
                    raise SimIndexError(
                        "E008",
                        "index",
                        self.name,
                        f"Out-of-bound access for tensor `{self.name}` on dimension {axis}: index range "
                        f"[{lo}, {hi}] exceed dimension size of {n}",
                        "Shrink the index range or exclude the out-of-range part with mask=",
                    )
                idx.append(kk)
            else:
                idx.append(k)
        return tuple(idx)

    def settle(self) -> None:
        """A pending result in this tile is used (read or written) before it landed: record it with
        this tile as its destination first (``ops.Result.commit``)."""
        p = self.alloc.pending
        if p is not None:
            ctx = current()
            assert ctx is not None, "a result is pending only during a run"
            p.commit(ctx)

    def read(self, mask: np.ndarray | bool | None = None) -> np.ndarray:
        """Values in storage dtype, shape ``self.shape`` (an instruction reading its operand).
        ``mask``: the instruction's mask; one of another shape (the instruction's output shape,
        which this operand broadcasts to) only limits the never-written check."""
        if self.alloc.pending is not None:
            self.settle()
        rm = mask if mask is None or mask is True or mask is False or mask.shape == self._shape else None
        if self.arr is not None:
            a = self.arr
        else:
            assert self.src is not None, "an index-array view has src"
            a = self.src[self._resolve(rm)]
        if self.alloc.unwritten:
            self._check_poison(a, mask)
        return a

    def read_raw(self) -> np.ndarray:
        """Values without the never-written check (the read half of a read-modify-write)."""
        if self.alloc.pending is not None:
            self.settle()
        if self.arr is not None:
            return self.arr
        assert self.src is not None, "an index-array view has src"
        return self.src[self._resolve(None)]

    def _check_poison(self, a, mask):
        """Poison provenance: the first read of never-written memory by an instruction warns, once per
        tensor, naming the instruction, the tensor and where it was allocated."""
        al = self.alloc
        pm = dt.poison_mask(a)
        if pm is None:
            al.unwritten = False  # ints/fp8 cannot carry the poison pattern: not detectable
            return
        if mask is False:
            return
        if mask is not None and mask is not True:
            try:
                pm = np.broadcast_to(pm, np.broadcast_shapes(pm.shape, mask.shape)) & mask
            except ValueError:
                pass  # a mask that does not line up with the operand: check it all
        if not pm.any():
            # is the whole allocation written by now (it was written piecewise)?  Checked on the
            # 1st, 2nd, 4th, 8th, ... clean read, so a tile read many times is not scanned each time
            n = al.poison_scans = al.poison_scans + 1
            if not n & (n - 1) and not dt.poison_mask(al.array).any():
                al.unwritten = False
            return
        al.unwritten = False  # once per tensor
        ctx = maybe_current()
        if ctx is None:
            return
        f, ln = al.origin
        ctx.warn_once(
            ("poison", al.id),
            f"{_calling_api()} reads {int(pm.sum())} never-written element(s) of tensor "
            f"`{al.name}` {tuple(self._shape)} (allocated at {os.path.basename(f)}:{ln}); they hold "
            f"garbage on hardware (NaN poison here)",
        )

    def read_f32(self, mask: np.ndarray | bool | None = None) -> np.ndarray:
        a = self.read(mask)
        if a.dtype == np.float32:
            return a
        return a.astype(np.float32)

    def write(
        self, value: Any, mask: np.ndarray | bool | None = None, *, api: str = "assign", kind: int = BY_OTHER
    ) -> None:
        """Write ``value`` (rounded once to the allocation's dtype) where ``mask`` holds.
        ``kind``: who writes (memory.BY_TENSOR_ENGINE / BY_OTHER), the PSUM written state."""
        al = self.alloc
        if al.pending is not None:
            self.settle()
        if al.immutable:
            raise SimTypeError(
                "E012",
                api,
                al.name,
                f"Cannot update immutable parameter `{al.name}`",
                "Kernel inputs are read-only: allocate an output with "
                "nl.ndarray(..., buffer=nl.shared_hbm), write it and return it",
            )
        if mask is False:
            return
        where = None if mask is None or mask is True else mask
        if self.arr is None and self._mask is not None:  # a predicated view
            where = self._mask if where is None else (np.broadcast_to(where, self._shape) & self._mask)
        whole = where is None and self.size == al.array.size
        if self.arr is not None:
            if where is not None:
                where = np.broadcast_to(where, self._shape)
            dt.cast_into(self.arr, value, al.dtype, where=where)
        else:
            assert self.src is not None, "an index-array view has src"
            idx = self._resolve(where)
            v = np.broadcast_to(np.asarray(value), self._shape)
            if where is not None:
                idx = tuple(i[where] if isinstance(i, np.ndarray) else i for i in idx)
                v = v[where]
            tmp = np.empty(np.shape(v), dtype=self.src.dtype)
            dt.cast_into(tmp, v, al.dtype)
            self.src[idx] = tmp
        if al.buffer is PSUM:
            if whole:
                al.psum_fill, al.psum_kind = kind, None
            elif al.psum_kind is not None or al.psum_fill != kind:
                kv = self.kinds()
                if where is None:
                    kv[...] = kind
                else:
                    kv[...] = np.where(np.broadcast_to(where, self._shape), np.int8(kind), np.asarray(kv))
        if al.unwritten and whole:
            al.unwritten = False  # the whole allocation was written
        al.written = True

    def accumulates_in_place(self) -> bool:
        """Whether :meth:`accumulate` adds in place: an fp32 basic view of memory written everywhere (for PSUM:
        one written state for the whole allocation), mutable, with no result waiting in it."""
        al = self.alloc
        a = self.arr
        return not (
            a is None
            or a.dtype != np.float32
            or al.unwritten
            or al.immutable
            or al.pending is not None
            or (al.buffer is PSUM and (al.psum_kind is not None or al.psum_fill == 0))
        )

    def accumulate(self, value: np.ndarray, kind: int) -> bool:
        """``self += value`` in place when that is one NumPy call: an fp32 basic view of memory that
        is written everywhere (PSUM accumulation, spec §8).  False: the caller takes the general path."""
        if not self.accumulates_in_place():
            return False
        al = self.alloc
        a = self.arr
        assert a is not None, "an in-place accumulation has a basic view"
        np.add(a, value, out=a)
        if al.buffer is PSUM and al.psum_fill != kind:
            if self.size == al.array.size:
                al.psum_fill = kind
            else:
                self.kinds()[...] = kind
        al.written = True
        return True

    def kinds(self) -> np.ndarray | _IndexedKinds:
        """The PSUM written state of this view's elements (a writable int8 view of the allocation's)."""
        al = self.alloc
        k = al.psum_kinds()
        a = self.arr
        if a is None:
            return _IndexedKinds(k, self)
        isz = al.array.itemsize
        return np.ndarray(
            a.shape, dtype=np.int8, buffer=k, offset=self.off // isz, strides=tuple(st // isz for st in a.strides)
        )

    def written_kinds(self) -> np.ndarray:
        """The PSUM written state of this view's elements, as values (uniform allocations: no copy
        of the allocation's state is materialised)."""
        al = self.alloc
        if al.psum_kind is None:
            return np.full(self._shape, al.psum_fill, dtype=np.int8)
        k = self.kinds()
        return k.get() if isinstance(k, _IndexedKinds) else k

    def region(self) -> Region:
        """Bytes this view touches: per partition on chip, from the tensor start in HBM."""
        r = self._region
        if r is None or r[0] != self.alloc.id:  # (an id changes only when a loop program renumbers its tile)
            r = self._region = self._compute_region()
        return r

    def _compute_region(self) -> Region:
        al = self.alloc
        row = al.row_bytes
        if self.arr is None:
            return self._advanced_region(row)
        a, par = self.arr, self.par
        lo = self.off
        if row:  # on chip: byte range within one partition
            lo %= row
            if par == 0 and a.ndim and a.flags.c_contiguous:
                return Region(al.id, al.buffer, lo, lo + (a.nbytes // a.shape[0] if a.shape[0] else 0))
        elif a.flags.c_contiguous:
            return Region(al.id, al.buffer, lo, lo + a.nbytes)
        if a.size == 0:
            return Region(al.id, al.buffer, lo, lo)
        hi = lo + a.itemsize
        for ax, (n, st) in enumerate(zip(a.shape, a.strides, strict=False)):
            if ax == par or (row and abs(st) >= row):
                continue
            if st < 0:
                lo += (n - 1) * st
            else:
                hi += (n - 1) * st
        return Region(al.id, al.buffer, lo, hi)

    def _advanced_region(self, row) -> Region:
        """Bounding box of an arange/mgrid access: each index's [min, max] on its axis."""
        al, src = self.alloc, self.src
        assert src is not None and self.key is not None, "an index-array view has src and key"
        lo = hi = self.off % row if row else self.off
        for k, n, st in zip(self.key, src.shape, src.strides, strict=False):
            if row and abs(st) >= row:  # the partition axis (or a block axis outside the row)
                continue
            if isinstance(k, np.ndarray):
                kmin, kmax = (int(k.min()), int(k.max())) if k.size else (0, 0)
                kmin, kmax = max(kmin, 0), min(kmax, n - 1)  # masked-out points are not accessed
            else:
                kmin = kmax = k
            a, b = kmin * st, kmax * st
            lo += min(a, b)
            hi += max(a, b)
        return Region(al.id, al.buffer, lo, hi + src.itemsize)

    # -- indexing (the core's: ints, slices, Ellipsis; integer index arrays) -----------------
    def index(self, key: Sequence[Any]) -> Self:
        """``self[key]`` for a tuple of ints, slices and Ellipsis (an index-array view is indexed
        through its index arrays)."""
        key = list(key)
        t = self._compose(key) if self.arr is None else self._basic(key)
        t.sliced = any(k.__class__ is slice for k in key)
        return t

    def take(self, parts: Sequence[int | np.ndarray], par: int | None = None) -> Self:
        """The index-array view ``self[parts]``: one int or integer array per axis (arrays broadcast
        together; ints are bounds-checked now, arrays by the instruction under its mask)."""
        if len(parts) != len(self._shape):
            raise SimIndexError(
                "E008",
                "index",
                self.name,
                f"{len(parts)} indices for a tensor of rank {len(self._shape)}",
                "Index every axis with an index expression or an int",
            )
        arrays = [p for p in parts if isinstance(p, np.ndarray)]
        try:
            shape = np.broadcast_shapes(*[a.shape for a in arrays])
        except ValueError:
            raise SimValueError(
                "E011",
                "index",
                self.name,
                "index expressions do not broadcast together: " + ", ".join(str(a.shape) for a in arrays),
            ) from None
        for axis, p in enumerate(parts):
            if not isinstance(p, np.ndarray):
                n = self._shape[axis]
                if p < 0 or p >= n:
                    raise self._oob(axis, p, p, n)
        if par is None:
            par = 0 if self.alloc.buffer in ON_CHIP else None
        t = self.__class__(self.alloc, src=self.arr, key=tuple(parts), par=par, shape=shape, off=self.off)
        t.sliced = True
        return t

    def where_view(self, pred: np.ndarray) -> Self:
        """The whole tile, accessed only where the boolean array ``pred`` holds."""
        if self.arr is None:
            # operand masking of an index-array view (``x[i_p, i_m][i_m < n]``; SDK 2.26 nki.api.shared.rst
            # "NKI API Masking", nki-samples conv.py): the same elements, read/written only where ``pred``
            # holds (and where the view's own predicate holds)
            t = self.__class__(self.alloc, src=self.src, key=self.key, par=self.par, shape=self._shape, off=self.off)
            vm = self._mask
            pm = np.broadcast_to(pred, self._shape)
            t._mask = pm if vm is None or isinstance(vm, bool) else (np.broadcast_to(vm, self._shape) & pm)
            t.sliced = True
            return t
        idx = np.indices(self._shape, sparse=True)
        t = self.__class__(self.alloc, src=self.arr, key=tuple(idx), par=self.par, shape=self._shape, off=self.off)
        t._mask = pred
        return t

    def _oob(self, axis, lo, hi, n):
        return SimIndexError(
            "E008",
            "index",
            self.name,
            f"Out-of-bound access for tensor `{self.name}` on dimension {axis}: index range [{lo}, {hi}] "
            f"exceed dimension size of {n}",
            "NKI does not clamp slices: fix the range (dimension sizes are in .shape)",
        )

    def _basic(self, key):
        shape = self._shape
        n_ell = 0
        for k in key:
            if k is Ellipsis:
                n_ell += 1
        if n_ell > 1:
            raise SimIndexError("E008", "index", self.name, "only one '...' is allowed in an index")
        if n_ell:
            i = next(i for i, k in enumerate(key) if k is Ellipsis)
            fill = len(shape) - (len(key) - 1)
            key = key[:i] + [slice(None)] * fill + key[i + 1 :]
        nk = len(key)
        if nk > len(shape):
            raise SimIndexError(
                "E008",
                "index",
                self.name,
                f"too many indices: {nk} for a tensor of rank {len(shape)}",
                f"{self.name} has shape {shape}",
            )
        npkey = []
        par = self.par
        new_par = None
        out_axis = 0
        off = self.off
        strides = self.arr.strides
        onchip = self.alloc.buffer in ON_CHIP
        lazy = False
        for axis, n in enumerate(shape):
            k = key[axis] if axis < nk else _ALL
            c = k.__class__
            if c is slice:
                step = 1 if k.step is None else int(k.step)
                if step < 1:
                    raise SimIndexError("E008", "index", self.name, f"slice step must be >= 1, got {step}")
                start = 0 if k.start is None else int(k.start)
                stop = n if k.stop is None else int(k.stop)
                if start < 0:
                    start += n
                if stop < 0:
                    stop += n
                if start < 0 or start > n or stop > n:
                    # bounds are checked at the instruction, under its mask, not here
                    # (err_tensor_access_out_of_bound: avoidable "by providing a proper mask";
                    # spec Corrections 9)
                    lazy = True
                npkey.append(slice(start, stop if stop > start else start, step))
                if start < n:
                    off += start * strides[axis]
                if axis == par:
                    new_par = out_axis
                out_axis += 1
            elif c is int or isinstance(k, np.integer) or isinstance(k, int) and c is not bool:
                i = int(k)
                if i < 0 and i >= -n:
                    i += n
                if i < 0 or i >= n:
                    lazy = True
                if onchip and axis == par:
                    # on-chip tiles stay at least 2-D: an int on the partition axis keeps a unit
                    # partition axis (known-issues doc: index (1, M) buffers as my_sbuf[0, 0:M])
                    npkey.append(slice(i, i + 1))
                    new_par = out_axis
                    out_axis += 1
                else:
                    npkey.append(i)
                if 0 <= i < n:
                    off += i * strides[axis]
            elif isinstance(k, Tensor):
                raise SimNotImplementedError(
                    "E100",
                    "index",
                    self.name,
                    "indirect (tensor-valued) indexing is not implemented in nki_kernels.sim",
                    "Use static indices",
                )
            elif k is None:
                raise SimIndexError(
                    "E008",
                    "index",
                    self.name,
                    "None/np.newaxis is not a valid NKI index",
                    "Use .reshape or .expand_dims",
                )
            else:
                raise SimIndexError(
                    "E008",
                    "index",
                    self.name,
                    f"unsupported index {k!r} of type {type(k).__name__}",
                    "Use ints, slices, nl.ds(start, size), nl.arange or nl.mgrid",
                )
        if lazy:
            return self._lazy(npkey, new_par, out_axis)
        a = self.arr[tuple(npkey)]
        if onchip and a.ndim < 2:
            # known-issues doc: tiles on SBUF/PSUM have at least 2 dimensions, so t[:, j] is (P, 1)
            a = a.reshape(a.shape + (1,) * (2 - a.ndim))
        return self.__class__(self.alloc, arr=a, par=new_par, off=off)

    def _lazy(self, npkey, new_par, n_out) -> Tensor:
        """A basic view reaching outside the tensor: kept as index arrays and bounds-checked by
        the instruction that accesses it, under its mask."""
        nd = max(n_out, 2) if self.alloc.buffer in ON_CHIP else n_out
        keys, shape, j = [], [], 0
        for k in npkey:
            if isinstance(k, slice):
                r = np.arange(k.start, k.stop, k.step)
                keys.append(r.reshape((1,) * j + (len(r),) + (1,) * (nd - j - 1)))
                shape.append(len(r))
                j += 1
            else:
                keys.append(np.full((1,) * nd, k, dtype=np.int64))
        shape += [1] * (nd - len(shape))
        return self.__class__(self.alloc, src=self.arr, key=tuple(keys), par=new_par, shape=tuple(shape), off=self.off)

    def _compose(self, key) -> Self:
        """Basic indexing (ints, slices) of an index-array view: index the broadcast index arrays."""
        shape = self._shape
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + [slice(None)] * (len(shape) - len(key) + 1) + key[i + 1 :]
        if len(key) > len(shape):
            raise SimIndexError(
                "E008", "index", self.name, f"too many indices: {len(key)} for a tensor of rank {len(shape)}"
            )
        onchip = self.alloc.buffer in ON_CHIP
        sel: list[slice | int] | tuple[slice | int, ...]
        sel = []
        for axis, n in enumerate(shape):
            k = key[axis] if axis < len(key) else slice(None)
            if isinstance(k, slice):
                sel.append(k)
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                i = int(k) + (n if k < 0 else 0)
                if not 0 <= i < n:
                    raise self._oob(axis, int(k), int(k), n)
                sel.append(slice(i, i + 1) if onchip and axis == 0 else i)
            else:
                raise SimIndexError(
                    "E008", "index", self.name, f"unsupported index {k!r} on an index view", "Use ints or slices"
                )
        sel = tuple(sel)
        assert self.key is not None, "an index-array view has key"
        keys = [np.broadcast_to(k, shape)[sel] if isinstance(k, np.ndarray) else k for k in self.key]
        arrays = [k for k in keys if isinstance(k, np.ndarray)]
        new_shape = arrays[0].shape if arrays else ()
        if onchip and len(new_shape) < 2:
            pad = (1,) * (2 - len(new_shape))
            keys = [k.reshape(k.shape + pad) if isinstance(k, np.ndarray) else k for k in keys]
            new_shape = new_shape + pad
        t = self.__class__(self.alloc, src=self.src, key=tuple(keys), par=self.par, shape=new_shape, off=self.off)
        if self._mask is not None and not isinstance(self._mask, bool):
            m = np.broadcast_to(self._mask, shape)[sel]
            t._mask = m.reshape(new_shape)
        return t

    # -- views ------------------------------------------------------------------------------
    def reshape_view(self, shape: Sequence[int], api: str = "reshape") -> Self:
        """The same elements seen with ``shape`` (a basic view whose layout allows it; on chip the
        partition axis stays first and unchanged)."""
        shape = tuple(int(s) for s in shape)
        if self.arr is None:
            raise SimNotImplementedError(
                "E022",
                api,
                self.name,
                "reshape not implemented for base tensor",
                "Reshape the tensor before indexing it with an index expression",
            )
        if int(np.prod(shape)) != self.size:
            raise SimValueError(
                "E011",
                api,
                self.name,
                f"cannot reshape {self._shape} ({self.size} elements) to {shape}",
                "The element count must not change",
            )
        try:
            new = np.reshape(self.arr, shape, copy=False)
        except ValueError:
            raise SimNotImplementedError(
                "E022",
                api,
                self.name,
                "reshape not implemented for base tensor (the view is not contiguous in row-major order)",
                "Reshape the whole tensor first, then slice it",
            ) from None
        par = None
        if self.alloc.buffer in ON_CHIP:
            if self.par != 0 or shape[0] != self._shape[0]:
                raise SimValueError(
                    "E011",
                    api,
                    self.name,
                    f"an on-chip reshape must keep the partition axis first and unchanged "
                    f"({self._shape[0] if self.par == 0 else 'none'}), got {shape}",
                    "Reshape only the free axes: (P, ...) -> (P, ...)",
                )
            par = 0
        return self.__class__(self.alloc, arr=new, par=par, off=self.off)

    def view_of(self, arr: np.ndarray) -> Self:
        """A tensor for the NumPy view ``arr`` of this tensor's storage (same allocation)."""
        base = self.alloc.array.__array_interface__["data"][0]
        off = arr.__array_interface__["data"][0] - base if arr.size else self.off
        return self.__class__(self.alloc, arr=arr, par=0 if self.alloc.buffer in ON_CHIP else None, off=off)

    def reinterpret(self, arr: np.ndarray, dtype: np.dtype | _TF32, name: str | None = None) -> Self:
        """``arr`` (a NumPy ``.view`` of this tensor's storage) as a tensor of another NKI dtype, sharing
        the storage: a new allocation record that is not counted again against capacity."""
        ctx = current("view")
        al = Alloc(
            ctx,
            self.alloc.buffer,
            arr,
            dtype,
            self.alloc._name if name is None else name,
            0 if self.alloc.buffer in ON_CHIP else None,
            track=False,
        )
        al.written = self.alloc.written
        return self.__class__(al, arr=arr, par=al.par_axis)


class _IndexedKinds:
    """The PSUM written state of an index-array view (assignable like an array)."""

    def __init__(self, kinds: np.ndarray, t: Tensor):
        self.kinds, self.t = kinds, t

    def _idx(self):
        t = self.t
        src_k = np.ndarray(
            t.src.shape,
            dtype=np.int8,
            buffer=self.kinds,
            offset=t.off // t.alloc.array.itemsize,
            strides=tuple(st // t.alloc.array.itemsize for st in t.src.strides),
        )
        return src_k, t._resolve(None)

    def get(self) -> np.ndarray:
        k, idx = self._idx()
        return np.asarray(k[idx]).reshape(self.t._shape)

    def __setitem__(self, key, value) -> None:
        k, idx = self._idx()
        if key is Ellipsis:
            k[idx] = value
        else:
            v = np.broadcast_to(np.asarray(k[idx]), self.t._shape).copy()
            v[key] = value
            k[idx] = v

    def __array__(self, dtype=None):
        return self.get()


# ---------------------------------------------------------------------------------------
# new tensors
# ---------------------------------------------------------------------------------------


def allocate(
    shape: int | tuple,
    dtype: object,
    buffer: Buffer | str,
    *,
    api: str = "ndarray",
    name: str = "",
    fill: float | None = None,
    poison: bool | None = None,
    phys_tiles: int | None = None,
    par: int = 0,
    track: bool = True,
    psum_banks_rule: str = "",
) -> Tensor:
    """Create a tensor of the run's tensor class; checks partition size (E001) and the PSUM bank
    (E004).  ``par``: the partition axis of an on-chip tensor (axes before it are block dimensions);
    ``fill``: an initial value (else poison, or zeros without poison); ``track=False``: not counted
    against capacity (a tensor the kernel places itself); ``psum_banks_rule``: the lenient rule under
    which a PSUM tensor may span banks (NKI 0.7), else that is E004."""
    ctx = current(api)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if not shape:
        raise SimValueError("E011", api, "shape", "a tensor needs at least one dimension", "Use shape (P, 1)")
    buf = buffer if buffer.__class__ is Buffer else BUFFERS[buffer]
    onchip = buf in ON_CHIP
    axis: int | None = par if onchip else None  # the partition axis (HBM has none)
    if onchip and shape[par] > limits.PMAX:
        raise partition_error(api, "shape", shape[par])
    for s in shape:
        if s < 0:
            raise SimValueError("E011", api, "shape", f"negative dimension in shape {shape}")
    d = dt.canonical(dtype, op=api)
    sd = dt.storage_dtype(d, ctx.options.precision)
    # On chip the partition axis is outermost in memory (block dims live inside each
    # partition), so a view's per-partition byte range is its offset modulo the row size.
    phys = shape if not axis else (shape[axis],) + shape[:axis] + shape[axis + 1 :]
    if fill is None:
        poison = ctx.options.poison if poison is None else poison
        arr = dt.poison_fill(phys, d, sd) if poison else np.zeros(phys, dtype=sd)
    elif fill == 0:
        arr = np.zeros(phys, dtype=sd)
    else:
        arr = np.empty(phys, dtype=sd)
        dt.cast_into(arr, fill, d)
    if axis:
        arr = np.moveaxis(arr, 0, axis)
    if buf is PSUM and ctx.options.check_capacity:
        per_block = int(np.prod(shape[par + 1 :], dtype=np.int64)) * dt.itemsize(d)
        if per_block > limits.PSUM_BANK_BYTES:
            if not psum_banks_rule:
                raise psum_bank_error(api, "shape", f"a {dt.name_of(d)} tile of shape {shape}", per_block)
            what = (
                f"a {dt.name_of(d)} PSUM tensor of shape {shape} spans {-(-per_block // limits.PSUM_BANK_BYTES)} "
                f"banks ({per_block} B per partition)"
            )
            fix = "Keep each instruction's PSUM operand inside one 2 KiB bank (nl.tile_size.psum_bank_fmax fp32)"
            lenient(psum_banks_rule, what, fix, op=api, arg="shape")
    al = Alloc(ctx, buf, arr, d, name, axis, phys_tiles=phys_tiles, track=track)
    if fill is not None:
        al.written = True
        al.psum_fill = BY_OTHER
    elif poison:
        al.unwritten = True
    return (ctx.tensor_cls or Tensor)(al, arr=al.array, par=axis)


def allocate_hbm(
    ctx: RunContext,
    shape: int | tuple,
    dtype: object,
    buffer: Buffer | str,
    *,
    api: str,
    name: str = "",
    kernel_level_rule: bool = True,
    hbm_is_private: bool = False,
) -> Tensor:
    """An HBM tensor of the kernel.  SPMD instances after the first see the same shared HBM tensors, handed
    out in creation order (instances run one after the other, spec §2; README divergences).  A private one
    (``private_hbm``; ``hbm`` too where ``hbm_is_private``, as NKI 0.7 documents ``nl.hbm`` "Alias of
    private_hbm") is each instance's own: "Only visible to each individual kernel instance in the SPMD grid"
    (aws-neuron-sdk 81ce03ae nki/api/nki/language/__init__.py; about-neuron/whats-new.rst, NKI 0.2.0: "tensors
    private to a single NeuronCore").  nki-library's rotational topk reshapes through a private scratch tensor
    on both cores of an LNC=2 launch at once.
    ``kernel_level_rule``: NKI 0.1's err_shared_hbm_must_in_kernel_level (the NKI 0.6/0.7 docs state no such
    rule: the 0.7 front end passes False)."""
    if kernel_level_rule and buffer == "shared_hbm" and ctx.loops:
        raise NKISyntaxError(
            "E013",
            api,
            "buffer",
            "shared_hbm buffer can only be created top level kernel scope",
            "Create kernel outputs before any loop",
        )
    if buffer == "shared_hbm" and ctx.scopes is not None:
        ctx.scopes.check_shared_hbm(api)  # kernel-level placement from the source (nki01/scopes.py)
    if buffer == "private_hbm" or (hbm_is_private and buffer == "hbm"):
        return allocate(shape, dtype, buffer, api=api, name=name)
    # the n-th shared tensor an instance creates is the launch's n-th, whichever instance gets there first: under
    # NKI 0.7's lockstep (nki07/lnc.py) a core with fewer rows to load reaches its output's allocation first
    # (nki-library cascaded_max, LNC=2, 25 rows: core 1's 12 rows were written to a tensor of its own)
    if ctx.hbm_cursor < len(ctx.hbm_registry):
        t = ctx.hbm_registry[ctx.hbm_cursor]
        ctx.hbm_cursor += 1
        return t
    t = allocate(shape, dtype, buffer, api=api, name=name)
    ctx.hbm_registry.append(t)
    ctx.hbm_cursor += 1
    return t


def fresh(
    value: np.ndarray,
    dtype: np.dtype | _TF32,
    buffer: Buffer | str = SBUF,
    *,
    api: str,
    mask: np.ndarray | bool | None = None,
    kind: int = BY_OTHER,
    origin: bool = False,
    private: bool = False,
    ctx: RunContext | None = None,
) -> Tensor:
    """A new tile (of the run's tensor class) holding an instruction's result ``value`` (fp32/int),
    rounded to ``dtype``; masked-out elements are poison (written by nobody).  ``origin``: the tile is
    one of the kernel's allocations (``nl.load``'s tile: allocated at the user's line and counted
    against capacity at once), not an instruction's temporary result.  ``private``: ``value`` is a
    new array the op computed (no operand's storage), so it needs no copy."""
    if ctx is None:
        ctx = current(api)
    shape = value.shape
    if len(shape) == 0:
        value = value.reshape(1, 1)
        shape = (1, 1)
    if shape[0] > limits.PMAX:
        raise partition_error(api, None, shape[0])
    d = dtype
    sd = dt.storage_dtype(d, ctx.options.precision)
    # A result never shares storage with an operand: an op may hand over an
    # operand's own array (identity activation, reshape, transpose of a (1, N) tile, ...), so
    # anything that is a view (allocation storage is always a view, see Alloc) is copied here,
    # once, for every op.
    if not private and value.base is not None or not value.flags.c_contiguous:
        value = np.array(value, order="C")
    if mask is None or mask is True:
        mask = None
        if value.dtype == sd and d is not dt.tfloat32:
            arr = value
        else:
            arr = np.empty(shape, dtype=sd)
            dt.cast_into(arr, value, d)
    else:
        # masked-out elements were written by nobody: poison (or 0 without poison)
        arr = dt.poison_fill(shape, d, sd) if ctx.options.poison else np.zeros(shape, dtype=sd)
        if mask is not False:
            mask = np.broadcast_to(mask, shape)
            dt.cast_into(arr, value, d, where=mask)
    buf = buffer if buffer.__class__ is Buffer else BUFFERS[buffer]
    if buf is PSUM and ctx.options.check_capacity:
        per = dt.itemsize(d)
        for n in shape[1:]:
            per *= n
        if per > limits.PSUM_BANK_BYTES:
            raise psum_bank_error(api, None, f"the result ({shape} {dt.name_of(d)})", per)
    al = Alloc(ctx, buf, arr, d, "", 0, origin=ctx.site if origin else False)
    al.written = True
    if mask is None:
        al.psum_fill = kind
    else:
        k = np.zeros(shape, dtype=np.int8)
        if mask is not False:
            k[mask] = kind
        al.psum_kind = k if buf is PSUM else None
        if ctx.options.poison:
            # the masked-out part was written by nobody: reading it warns like any never-written memory
            al.unwritten = True
            if not origin:
                al.origin = ctx.site
    t = (ctx.tensor_cls or Tensor)(al, arr=al.array, par=0)
    # the whole (C-contiguous, partition-first) allocation: bytes [0, row) of every partition, as
    # _compute_region would find
    t._region = Region(al.id, buf, 0, al.row_bytes)
    return t


def hbm_input(ctx: RunContext, array: np.ndarray, name: str, mutable: bool = False) -> Tensor:
    """A kernel argument: an HBM copy of the caller's array (immutable unless ``mutable``)."""
    d = dt.canonical(array.dtype, op="simulate_kernel", arg=name)
    sd = dt.storage_dtype(d, ctx.options.precision)
    if not mutable and array.dtype == sd and array.flags.c_contiguous:
        # an immutable input is read in place through a read-only view (every write to it is E012
        # first; NumPy refuses any other): no copy of a CS149 224x224 batch (205 MB, 0.3 s)
        arr = array.view()
        arr.flags.writeable = False
    else:
        arr = np.array(array, dtype=sd, copy=True, order="C")
    al = Alloc(ctx, Buffer.HBM, arr, d, name, None, immutable=not mutable)
    al.argument = True
    al.written = not mutable  # a writable argument counts as written once the kernel writes it
    return (ctx.tensor_cls or Tensor)(al, arr=al.array)


def is_tensor(x: object) -> bool:
    return isinstance(x, Tensor)


def in_kernel() -> bool:
    return maybe_current() is not None
