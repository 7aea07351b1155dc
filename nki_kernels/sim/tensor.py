"""Tensors, tiles, views and affine index expressions (spec §3, §4).

A :class:`Tensor` is a view of an :class:`~.memory.Alloc`:

* a *basic* view (ints, slices, ``...``, ``nl.ds``) holds a NumPy view ``arr`` of the
  allocation's storage, so reads and writes go straight to memory;
* an *advanced* view (``nl.arange``/``nl.mgrid`` index expressions, possibly mixed with
  ints) holds the source view ``src`` and the index arrays ``key``; it is resolved when an
  instruction reads or writes it, under the instruction's ``mask`` (masked-out points are
  never accessed, so out-of-bounds indices under a false mask are legal, spec §6).

On-chip (SBUF/PSUM) tensors remember which axis is the partition axis (``par``); a
*tile* is a view whose partition axis is axis 0.  HBM tensors have no partition axis.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from . import dtypes as dt
from . import limits
from .context import current, maybe_current, unproven
from .memory import Alloc
from .errors import _SIM_DIR, user_location, NKISyntaxError, SimIndexError, partition_error, psum_bank_error, SimNotImplementedError, SimTypeError, SimValueError
from .indexing import IndexExpr, MaskExpr, MGrid, mask_array
from .trace import Region

ON_CHIP = ("sbuf", "psum")


class _Ops:
    """What Tensor's operators call, bound by the modules above this one once they are loaded
    (ops.py: assign, accumulate; language.py: nl) -- tensor.py cannot import them (they import
    tensor.py), and function-local imports would hide the dependency."""
    assign = accumulate = nl = None


OPS = _Ops()
HBM_KINDS = ("hbm", "shared_hbm", "private_hbm")


# ---------------------------------------------------------------------------------------
# Affine index expressions and masks
# ---------------------------------------------------------------------------------------

def _calling_api() -> str:
    """The NKI API the user called (the outermost interpreter frame below the user's line)."""
    f = sys._getframe(1)
    last = None
    while f is not None and f.f_code.co_filename.startswith(_SIM_DIR):
        last = f
        f = f.f_back
    if last is None:
        return "an instruction"
    api = last.f_locals.get("api")
    return api if isinstance(api, str) else last.f_code.co_name


# ---------------------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------------------

class Tensor:
    """An NKI tensor / tile view.  ``.shape .dtype .ndim .itemsize .buffer .name``."""
    __slots__ = ("alloc", "arr", "par", "src", "key", "_shape", "_exact", "_exact_ver", "_event", "off", "_mask",
                 "_sliced")
    __array_priority__ = 100

    def __init__(self, alloc: Alloc, arr=None, par=None, src=None, key=None, shape=None, off=0):
        self.alloc = alloc
        self.off = off      # byte offset of this view's first element in the allocation
        self.arr = arr
        self.par = par
        self.src = src
        self.key = key
        self._shape = arr.shape if arr is not None else tuple(shape)
        self._exact = None
        self._exact_ver = -1
        self._event = None
        self._mask = None      # the mask= of the instruction that produced this fresh result
        self._sliced = False   # made by indexing with a slice/arange (nested indexing warns)

    # -- metadata -------------------------------------------------------------------------
    shape = property(lambda s: s._shape)
    dtype = property(lambda s: s.alloc.dtype)
    ndim = property(lambda s: len(s._shape))
    itemsize = property(lambda s: s.alloc.itemsize)
    buffer = property(lambda s: s.alloc.buffer)
    name = property(lambda s: s.alloc.name)

    @property
    def size(self):
        if self.arr is not None:
            return self.arr.size
        n = 1
        for s in self._shape:
            n *= s
        return n

    def __len__(self):
        return self._shape[0]

    def __repr__(self):
        return f"Tensor({self.alloc.name}, shape={self._shape}, dtype={dt.name_of(self.dtype)}, " \
               f"buffer={self.alloc.buffer})"

    def __bool__(self):
        if self.alloc.buffer in HBM_KINDS:
            # `if hbm_tensor:` (an optional kernel argument) is truthy in real NKI 0.1: the SDK's
            # nki/test examples test optional tensors this way (issue 8 item 12)
            return True
        raise SimValueError("E015", "tensor", self.name,
                            "the truth value of a tensor is ambiguous (dynamic control flow is not supported)",
                            "Use mask= or nl.where instead of if/and/or on tile values")

    __hash__ = object.__hash__

    def __iter__(self):
        raise SimTypeError("E010", "iter", self.name, "NKI tensors are not iterable",
                           "Index them with slices or nl.arange")

    @property
    def is_onchip(self):
        return self.alloc.buffer in ON_CHIP

    def is_fresh(self) -> bool:
        """An instruction's result that nobody has written since (its exact fp32 value is valid)."""
        return self._exact is not None and self._exact_ver == self.alloc.version

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
                        "E008", "index", self.name,
                        f"Out-of-bound access for tensor `{self.name}` on dimension {axis}: index range "
                        f"[{lo}, {hi}] exceed dimension size of {n}",
                        "Shrink the index range or exclude the out-of-range part with mask=")
                idx.append(kk)
            else:
                idx.append(k)
        return tuple(idx)

    def read(self, mask=None) -> np.ndarray:
        """Values in storage dtype, shape ``self.shape`` (an instruction reading its operand).
        ``mask``: the instruction's mask; one of another shape (the instruction's output shape,
        which this operand broadcasts to) only limits the never-written check."""
        rm = mask if mask is None or mask is True or mask is False or mask.shape == self._shape else None
        a = self.arr if self.arr is not None else self.src[self._resolve(rm)]
        if self.alloc.unwritten:
            self._check_poison(a, mask)
        return a

    def read_raw(self) -> np.ndarray:
        """Values without the never-written check (the read half of a read-modify-write)."""
        return self.arr if self.arr is not None else self.src[self._resolve(None)]

    def _check_poison(self, a, mask):
        """Issue 11: the first read of never-written memory by an instruction warns, once per
        tensor, naming the instruction, the tensor and where it was allocated."""
        al = self.alloc
        pm = dt.poison_mask(a)
        if pm is None:
            al.unwritten = False     # ints/fp8 cannot carry the poison pattern: not detectable
            return
        if mask is False:
            return
        if mask is not None and mask is not True:
            try:
                pm = np.broadcast_to(pm, np.broadcast_shapes(pm.shape, mask.shape)) & mask
            except ValueError:
                pass                  # a mask that does not line up with the operand: check it all
        if not pm.any():
            return
        al.unwritten = False         # once per tensor
        ctx = maybe_current()
        if ctx is None:
            return
        f, ln = al.origin
        ctx.warn_once(("poison", al.id),
                      f"{_calling_api()} reads {int(pm.sum())} never-written element(s) of tensor "
                      f"`{al.name}` {tuple(self._shape)} (allocated at {os.path.basename(f)}:{ln}); they hold "
                      f"garbage on hardware (NaN poison here)")

    def read_f32(self, mask=None) -> np.ndarray:
        a = self.read(mask)
        if a.dtype == np.float32:
            return a
        return a.astype(np.float32)

    def write(self, value, mask=None, *, api="assign") -> None:
        al = self.alloc
        if al.immutable:
            raise SimTypeError("E012", api, al.name, f"Cannot update immutable parameter `{al.name}`",
                               "Kernel inputs are read-only: allocate an output with "
                               "nl.ndarray(..., buffer=nl.shared_hbm), write it and return it")
        if mask is False:
            return
        where = None if mask is None or mask is True else mask
        if self.arr is None and self._mask is not None:      # a tile[pred] view
            where = self._mask if where is None else (np.broadcast_to(where, self._shape) & self._mask)
        if self.arr is not None:
            if where is not None:
                where = np.broadcast_to(where, self._shape)
            dt.cast_into(self.arr, value, al.dtype, where=where)
        else:
            idx = self._resolve(where)
            v = np.broadcast_to(np.asarray(value), self._shape)
            if where is not None:
                idx = tuple(i[where] if isinstance(i, np.ndarray) else i for i in idx)
                v = v[where]
            tmp = np.empty(np.shape(v), dtype=self.src.dtype)
            dt.cast_into(tmp, v, al.dtype)
            self.src[idx] = tmp
        if al.unwritten and where is None and self.size == al.array.size:
            al.unwritten = False          # the whole allocation was written
        al.written = True
        al.version += 1

    def region(self) -> Region:
        """Bytes this view touches: per partition on chip, from the tensor start in HBM."""
        al = self.alloc
        row = al.row_bytes
        if self.arr is None:
            return self._advanced_region(row)
        a, par = self.arr, self.par
        lo = self.off
        if row:                       # on chip: byte range within one partition
            lo %= row
            if par == 0 and a.ndim and a.flags.c_contiguous:
                return Region(al.id, al.buffer, lo, lo + (a.nbytes // a.shape[0] if a.shape[0] else 0))
        elif a.flags.c_contiguous:
            return Region(al.id, al.buffer, lo, lo + a.nbytes)
        if a.size == 0:
            return Region(al.id, al.buffer, lo, lo)
        hi = lo + a.itemsize
        for ax, (n, st) in enumerate(zip(a.shape, a.strides)):
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
        lo = hi = self.off % row if row else self.off
        for k, n, st in zip(self.key, src.shape, src.strides):
            if row and abs(st) >= row:      # the partition axis (or a block axis outside the row)
                continue
            if isinstance(k, np.ndarray):
                kmin, kmax = (int(k.min()), int(k.max())) if k.size else (0, 0)
                kmin, kmax = max(kmin, 0), min(kmax, n - 1)   # masked-out points are not accessed
            else:
                kmin = kmax = k
            a, b = kmin * st, kmax * st
            lo += min(a, b)
            hi += max(a, b)
        return Region(al.id, al.buffer, lo, hi + src.itemsize)

    # -- indexing ---------------------------------------------------------------------------
    def __getitem__(self, key) -> "Tensor":
        key = key if isinstance(key, tuple) else (key,)
        flat = []
        for k in key:
            if isinstance(k, MGrid):
                flat.extend(k.parts)
            else:
                flat.append(k)
        advanced = any(isinstance(k, IndexExpr) for k in flat)
        if self._sliced and any(isinstance(k, IndexExpr) or isinstance(k, slice) and k != slice(None)
                                for k in flat):
            # CS149 course tips (asst4-trainium2 README): "Do not use nested slicing/mgrid
            # (e.g. t[0:128, 128:256][0:64, 0:64])" -- legal on paper, trouble in practice
            unproven("nested_index", f"indexing `{self.name}` again after slicing it (slice of a slice) is "
                     "hardware-unproven (CS149 tips: do not use nested slicing/mgrid); index the original "
                     "tensor once with the combined range")
        if len(flat) == 1 and isinstance(flat[0], MaskExpr):
            return self._masked_view(flat[0])
        if self.arr is None:
            if advanced:
                raise SimNotImplementedError("E100", "index", self.name,
                                             "indexing a view that was itself indexed with nl.arange/mgrid "
                                             "again with nl.arange/mgrid is not implemented in nki_kernels.sim",
                                             "Index the original tensor once with the combined expression")
            t = self._compose(flat)
        elif advanced:
            t = self._advanced(flat)
        else:
            t = self._basic(flat)
        t._sliced = any(isinstance(k, (slice, IndexExpr)) for k in flat)
        return t

    def _masked_view(self, m: MaskExpr) -> "Tensor":
        """``tile[pred]`` with a boolean affine expression: the whole tile, accessed only where
        ``pred`` holds (decision, README divergences: the 2.26 docs do not define this form; it
        reads as the mask= predicate attached to the access)."""
        if self.arr is None:
            raise SimNotImplementedError("E100", "index", self.name, "a predicate index on an arange view",
                                         "Index the tile with slices first, then with the predicate")
        idx = np.indices(self._shape, sparse=True)
        t = Tensor(self.alloc, src=self.arr, key=tuple(idx), par=self.par, shape=self._shape, off=self.off)
        t._mask = mask_array(m, self._shape, "index")
        return t

    def _oob(self, axis, lo, hi, n):
        return SimIndexError(
            "E008", "index", self.name,
            f"Out-of-bound access for tensor `{self.name}` on dimension {axis}: index range [{lo}, {hi}] "
            f"exceed dimension size of {n}",
            "NKI does not clamp slices: fix the range (dimension sizes are in .shape)")

    def _basic(self, key):
        shape = self._shape
        n_ell = sum(1 for k in key if k is Ellipsis)
        if n_ell > 1:
            raise SimIndexError("E008", "index", self.name, "only one '...' is allowed in an index")
        if n_ell:
            i = next(i for i, k in enumerate(key) if k is Ellipsis)
            fill = len(shape) - (len(key) - 1)
            key = key[:i] + [slice(None)] * fill + key[i + 1:]
        if len(key) > len(shape):
            raise SimIndexError("E008", "index", self.name,
                                f"too many indices: {len(key)} for a tensor of rank {len(shape)}",
                                f"{self.name} has shape {shape}")
        npkey = []
        par = self.par
        new_par = None
        out_axis = 0
        off = self.off
        strides = self.arr.strides
        onchip = self.alloc.buffer in ON_CHIP
        lazy = False
        for axis, n in enumerate(shape):
            k = key[axis] if axis < len(key) else slice(None)
            if isinstance(k, Tensor):
                raise SimNotImplementedError("E100", "index", self.name,
                                             "indirect (tensor-valued) indexing is not implemented in "
                                             "nki_kernels.sim", "Use static indices")
            if isinstance(k, slice):
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
                    # spec Corrections 9, issue 8 item 3)
                    lazy = True
                npkey.append(slice(start, max(stop, start), step))
                if start < n:
                    off += start * strides[axis]
                if axis == par:
                    new_par = out_axis
                out_axis += 1
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
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
            elif k is None:
                raise SimIndexError("E008", "index", self.name, "None/np.newaxis is not a valid NKI index",
                                    "Use .reshape or .expand_dims")
            else:
                raise SimIndexError("E008", "index", self.name,
                                    f"unsupported index {k!r} of type {type(k).__name__}",
                                    "Use ints, slices, nl.ds(start, size), nl.arange or nl.mgrid")
        if lazy:
            return self._lazy(npkey, new_par, out_axis)
        a = self.arr[tuple(npkey)]
        if onchip and a.ndim < 2:
            # known-issues doc: tiles on SBUF/PSUM have at least 2 dimensions, so t[:, j] is (P, 1)
            a = a.reshape(a.shape + (1,) * (2 - a.ndim))
        return Tensor(self.alloc, arr=a, par=new_par, off=off)

    def _lazy(self, npkey, new_par, n_out) -> "Tensor":
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
        return Tensor(self.alloc, src=self.arr, key=tuple(keys), par=new_par, shape=tuple(shape), off=self.off)

    def _compose(self, key) -> "Tensor":
        """Basic indexing (ints, slices) of an index-array view: index the broadcast index arrays."""
        shape = self._shape
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + [slice(None)] * (len(shape) - len(key) + 1) + key[i + 1:]
        if len(key) > len(shape):
            raise SimIndexError("E008", "index", self.name,
                                f"too many indices: {len(key)} for a tensor of rank {len(shape)}")
        onchip = self.alloc.buffer in ON_CHIP
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
                raise SimIndexError("E008", "index", self.name, f"unsupported index {k!r} on an index view",
                                    "Use ints or slices")
        sel = tuple(sel)
        keys = [np.broadcast_to(k, shape)[sel] if isinstance(k, np.ndarray) else k for k in self.key]
        arrays = [k for k in keys if isinstance(k, np.ndarray)]
        new_shape = arrays[0].shape if arrays else ()
        if onchip and len(new_shape) < 2:
            pad = (1,) * (2 - len(new_shape))
            keys = [k.reshape(k.shape + pad) if isinstance(k, np.ndarray) else k for k in keys]
            new_shape = new_shape + pad
        t = Tensor(self.alloc, src=self.src, key=tuple(keys), par=self.par, shape=new_shape, off=self.off)
        if self._mask is not None and not isinstance(self._mask, bool):
            m = np.broadcast_to(self._mask, shape)[sel]
            t._mask = m.reshape(new_shape)
        return t

    def _advanced(self, key):
        if len(key) != len(self._shape):
            if any(isinstance(k, slice) or k is Ellipsis for k in key):
                raise NKISyntaxError("E014", "index", self.name,
                                     "Mixing basic tensor indexing and advanced tensor indexing is not supported",
                                     "Index every axis with nl.arange/mgrid expressions (or ints)")
            raise SimIndexError("E008", "index", self.name,
                                f"{len(key)} indices for a tensor of rank {len(self._shape)}",
                                "Index every axis with nl.arange/mgrid expressions or ints")
        parts = []
        for k in key:
            if isinstance(k, IndexExpr):
                if k.ndim == 1 and len(key) > 1:
                    raise NKISyntaxError("E014", "index", self.name, f"{self.name} with 1d arange is not supported",
                                         "Lift it: nl.arange(n)[:, None] for the partition axis, "
                                         "nl.arange(n)[None, :] for a free axis")
                parts.append(k.v)
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                parts.append(int(k))
            elif isinstance(k, slice) or k is Ellipsis:
                raise NKISyntaxError("E014", "index", self.name,
                                     "Mixing basic tensor indexing and advanced tensor indexing is not supported",
                                     "Use nl.arange for every axis, or slices for every axis")
            else:
                raise SimIndexError("E008", "index", self.name, f"unsupported index {k!r}")
        arrays = [p for p in parts if isinstance(p, np.ndarray)]
        try:
            shape = np.broadcast_shapes(*[a.shape for a in arrays])
        except ValueError:
            raise SimValueError("E011", "index", self.name, "index expressions do not broadcast together: "
                                + ", ".join(str(a.shape) for a in arrays)) from None
        # ints stay ints for bounds messages; check their range now
        for axis, p in enumerate(parts):
            if not isinstance(p, np.ndarray):
                n = self._shape[axis]
                if p < 0 or p >= n:
                    raise self._oob(axis, p, p, n)
        par = 0 if self.alloc.buffer in ON_CHIP else None
        return Tensor(self.alloc, src=self.arr, key=tuple(parts), par=par, shape=shape, off=self.off)

    def __setitem__(self, key, value):
        OPS.assign(self[key], value)

    # -- views ------------------------------------------------------------------------------
    def reshape(self, *shape, **kw):
        if "shape" in kw:
            shape = (kw.pop("shape"),)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if self.arr is None:
            raise SimNotImplementedError("E022", "reshape", self.name, "reshape not implemented for base tensor",
                                         "Reshape the tensor before indexing it with nl.arange")
        if int(np.prod(shape)) != self.size:
            raise SimValueError("E011", "reshape", self.name,
                                f"cannot reshape {self._shape} ({self.size} elements) to {shape}",
                                "The element count must not change")
        try:
            new = np.reshape(self.arr, shape, copy=False)
        except ValueError:
            raise SimNotImplementedError("E022", "reshape", self.name,
                                         "reshape not implemented for base tensor (the view is not "
                                         "contiguous in row-major order)",
                                         "Reshape the whole tensor first, then slice it") from None
        par = None
        if self.alloc.buffer in ON_CHIP:
            if self.par != 0 or shape[0] != self._shape[0]:
                raise SimValueError("E011", "reshape", self.name,
                                    f"an on-chip reshape must keep the partition axis first and unchanged "
                                    f"({self._shape[0] if self.par == 0 else 'none'}), got {shape}",
                                    "Reshape only the free axes: (P, ...) -> (P, ...)")
            par = 0
        return Tensor(self.alloc, arr=new, par=par, off=self.off)

    def view(self, dtype):
        d = dt.canonical(dtype, op="view")
        if dt.itemsize(d) != self.itemsize or self.arr is None:
            raise SimValueError("E018", "view", self.name, "view() needs a dtype of the same size",
                                f"{dt.name_of(self.dtype)} is {self.itemsize} bytes")
        ctx = current("view")
        al = Alloc(ctx, self.alloc.buffer, self.arr.view(dt.storage_dtype(d, ctx.options.precision)), d,
                self.name + "_view", self.par)
        al.written = True
        return Tensor(al, arr=al.array, par=self.par)

    def astype(self, dtype):
        return OPS.nl.copy(self, dtype=dtype)

    def broadcast_to(self, shape):
        return OPS.nl.broadcast_to(self, shape=shape)

    def expand_dims(self, axis):
        return OPS.nl.expand_dims(self, axis)

    def assert_shape(self, shape):
        if tuple(shape) != self._shape:
            raise SimValueError("E011", "assert_shape", self.name, f"unexpected shape for {self.name}, "
                                f"expected {tuple(shape)}, got {self._shape}")
        return self

    # -- arithmetic operators map to nl.* (spec §10) ------------------------------------
    def __iadd__(self, other):
        return OPS.accumulate(self, other, "add")

    def __isub__(self, other):
        return OPS.accumulate(self, other, "subtract")

    def __imul__(self, other):
        return OPS.accumulate(self, other, "multiply")

    def __itruediv__(self, other):
        return OPS.accumulate(self, other, "divide")


def _binop(name, reverse=False):
    def f(self, other):
        fn = getattr(OPS.nl, name)
        return fn(other, self) if reverse else fn(self, other)
    f.__name__ = name
    return f


for _n, _op in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
                ("pow", "power"), ("mod", "mod"), ("and", "bitwise_and"), ("or", "bitwise_or"),
                ("xor", "bitwise_xor"), ("lshift", "left_shift"), ("rshift", "right_shift"),
                ("floordiv", "floor_divide")):
    setattr(Tensor, f"__{_n}__", _binop(_op))
    setattr(Tensor, f"__r{_n}__", _binop(_op, reverse=True))
for _n, _op in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"),
                ("eq", "equal"), ("ne", "not_equal")):
    setattr(Tensor, f"__{_n}__", _binop(_op))
Tensor.__neg__ = lambda s: OPS.nl.negative(s)
Tensor.__invert__ = lambda s: OPS.nl.invert(s)
Tensor.__abs__ = lambda s: OPS.nl.abs(s)
Tensor.__hash__ = object.__hash__


# ---------------------------------------------------------------------------------------
# allocation
# ---------------------------------------------------------------------------------------

class ParDim(int):
    """``nl.par_dim(n)``: marks the partition axis; axes before it are (deprecated) block dims."""


def allocate(shape, dtype, buffer, *, api="ndarray", name="", fill=None, poison=None, phys_tiles=None) -> Tensor:
    """Create a tensor; checks partition size (E001) and the PSUM bank (E004)."""
    ctx = current(api)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(shape)
    if not shape:
        raise SimValueError("E011", api, "shape", "a tensor needs at least one dimension", "Use shape (P, 1)")
    par = None
    if buffer in ON_CHIP:
        pars = [i for i, s in enumerate(shape) if isinstance(s, ParDim)]
        par = pars[0] if pars else 0
        if par > 0:
            ctx.warn_once("blockdim", "block dimensions (axes before nl.par_dim) are deprecated in NKI 0.1 "
                          "(warn_block_dimension_is_deprecated); each block is a separate tile")
        if shape[par] > limits.PMAX:
            raise partition_error(api, "shape", shape[par])
    shape = tuple(int(s) for s in shape)
    for s in shape:
        if s < 0:
            raise SimValueError("E011", api, "shape", f"negative dimension in shape {shape}")
    d = dt.canonical(dtype, op=api)
    sd = dt.storage_dtype(d, ctx.options.precision)
    # On chip the partition axis is outermost in memory (block dims live inside each
    # partition), so a view's per-partition byte range is its offset modulo the row size.
    phys = shape if not par else (shape[par],) + shape[:par] + shape[par + 1:]
    if fill is None:
        poison = ctx.options.poison if poison is None else poison
        arr = dt.poison_fill(phys, d, sd) if poison else np.zeros(phys, dtype=sd)
    elif fill == 0:
        arr = np.zeros(phys, dtype=sd)
    else:
        arr = np.empty(phys, dtype=sd)
        dt.cast_into(arr, fill, d)
    if par:
        arr = np.moveaxis(arr, 0, par)
    if buffer == "psum" and ctx.options.check_capacity:
        per_block = int(np.prod(shape[par + 1:], dtype=np.int64)) * dt.itemsize(d)
        if per_block > limits.PSUM_BANK_BYTES:
            raise psum_bank_error(api, "shape", f"a {dt.name_of(d)} tile of shape {shape}", per_block)
    al = Alloc(ctx, buffer, arr, d, name, par, zeroed=(fill == 0), phys_tiles=phys_tiles)
    if fill is not None:
        al.written = True
    elif poison:
        al.unwritten = True
    return Tensor(al, arr=al.array, par=par)


def fresh(value, dtype, buffer="sbuf", *, api, mask=None) -> Tensor:
    """A new tile holding an instruction's result ``value`` (fp32/int), rounded to ``dtype``.

    The exact value is kept so that assigning the result straight into a destination of
    another dtype rounds once (spec §5 deferred cast)."""
    ctx = current(api)
    shape = value.shape
    if len(shape) == 0:
        value = value.reshape(1, 1)
        shape = (1, 1)
    if shape[0] > limits.PMAX:
        raise partition_error(api, None, shape[0])
    d = dtype
    sd = dt.storage_dtype(d, ctx.options.precision)
    # A result never shares storage with an operand (issue 8 item 14): an op may hand over an
    # operand's own array (identity activation, reshape, transpose of a (1, N) tile, ...), so
    # anything that is a view (allocation storage is always a view, see Alloc) is copied here,
    # once, for every op.
    if value.base is not None or not value.flags.c_contiguous:
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
    if buffer == "psum" and ctx.options.check_capacity:
        per = int(np.prod(shape[1:], dtype=np.int64)) * dt.itemsize(d)
        if per > limits.PSUM_BANK_BYTES:
            raise psum_bank_error(api, None, f"the result ({shape} {dt.name_of(d)})", per)
    al = Alloc(ctx, buffer, arr, d, "", 0, origin=False)
    al.written = True
    if mask is not None and ctx.options.poison:
        # the masked-out part was written by nobody: reading it warns like any never-written memory
        al.unwritten = True
        al.origin = user_location()
    t = Tensor(al, arr=al.array, par=0)
    t._exact = value
    t._exact_ver = al.version
    t._mask = mask
    return t


def hbm_input(ctx, array: np.ndarray, name: str, mutable: bool = False) -> Tensor:
    """A kernel argument: an HBM copy of the caller's array (immutable unless ``mutable``)."""
    d = dt.canonical(array.dtype, op="simulate_kernel", arg=name)
    sd = dt.storage_dtype(d, ctx.options.precision)
    arr = np.array(array, dtype=sd, copy=True, order="C")
    al = Alloc(ctx, "hbm", arr, d, name, None, immutable=not mutable)
    al.written = not mutable     # a writable (output) argument counts as written once written
    return Tensor(al, arr=al.array)


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def in_kernel() -> bool:
    return maybe_current() is not None
