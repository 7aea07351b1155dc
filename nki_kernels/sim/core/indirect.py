"""Indirect (tensor-valued) indexing and gathers: ``t[idx_tile, i_f]``, ``oob_mode``, gathers.

Sources (aws-neuron-sdk): 2.26 docs at 49ee15c5 ``general/nki/api/nki/isa/__init__.py``
(``dma_copy``: ``oob_mode``, ``dst_rmw_op``; ``local_gather``) and ``.../language/__init__.py``
(``gather_flattened``); golden values in ``nki/test`` at 81ce03ae: ``test_nki_isa_dma_copy.py``,
``test_nki_nl_load_store_indirect.py``, ``test_nki_isa_local_gather.py``,
``test_nki_nl_gather_flattened.py``.

An index tile on an axis of an HBM (or SBUF) tensor selects, per point of the access, the
element whose index on that axis is the tile's value there.  The interpreter executes
eagerly, so the tile's values are read when the view is created and the view becomes an
ordinary advanced (arange-style) view, resolved at the instruction under its mask.  Out of
bounds indices follow ``oob_mode``: ``error`` (the default, and the only mode of ``nl.load`` /
``nl.store``) raises exactly ``IndexError`` with NumPy's message on the flattened tensor, as
the real simulator does (``test_indirect_load_oob_err_negative``: "index 66048 is out of bounds
for axis 0 with size 65536"); ``skip`` leaves the destination points of out-of-bounds indices
unwritten (``test_indirect_load_oob_skip`` / ``test_indirect_store_oob_skip``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .context import RunContext
from .errors import NKISyntaxError, SimIndexError, SimTypeError, SimValueError
from .ops import Dst, DTypeArg, MaskArg, compute_result, emit, op
from .ops import mask_of as mask_array
from .tensor import ON_CHIP, SBUF, Tensor
from .trace import DVE, POOL
from .vector import copy_result, engine_for


class IndirectTensor(Tensor):
    """An advanced view whose indices on some axes came from index tiles.

    ``index_tiles``: the tiles the addresses were read from (the DMA reads them too)."""

    __slots__ = ("index_tiles", "from_mgrid")
    dynamic = True
    index_tiles: tuple[Tensor, ...]
    from_mgrid: bool  # built from nl.mgrid fields (check_load_store)
    # an index-array view: its source and index arrays are always set
    src: np.ndarray
    key: tuple

    def valid(self) -> np.ndarray:
        """Bool array (view shape): the points whose indices are all in bounds."""
        ok = np.ones(self._shape, dtype=bool)
        for axis, k in enumerate(self.key):
            if isinstance(k, np.ndarray):
                n = self.src.shape[axis]
                kk = np.broadcast_to(k, self._shape)
                ok &= (kk >= 0) & (kk < n)
        return ok

    def _resolve(self, mask):
        m = None if mask is None or isinstance(mask, bool) else np.broadcast_to(mask, self._shape)
        vm = self._mask  # a predicate attached to the view itself (tile[pred])
        if vm is not None and not isinstance(vm, bool):
            m = vm if m is None else (m & vm)
        idx = []
        for k in self.key:
            if isinstance(k, np.ndarray):
                kk = np.broadcast_to(k, self._shape)
                idx.append(np.where(m, kk, 0) if m is not None else kk)
            else:
                idx.append(k)
        bad = ~self.valid()
        if m is not None:
            bad &= m
        if bad.any():
            # NumPy's own message on the flattened tensor, as neuronxcc's simulator raises it
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            isz = self.src.itemsize
            flat = self.off // isz
            for axis, k in enumerate(idx):
                v = k[first] if isinstance(k, np.ndarray) else k
                flat += int(v) * (self.src.strides[axis] // isz)
            raise IndexError(f"index {flat} is out of bounds for axis 0 with size {self.alloc.array.size}")
        return tuple(idx)


class DynamicAddressView(IndirectTensor):
    """An access pattern with a runtime start (NKI 0.7 ``.ap(scalar_offset=...)``) that reaches outside its
    tensor: ``key`` holds flat element indices.  The DMA that uses it drops the out-of-bounds points under
    ``oob_mode=skip`` (:func:`oob_mask`) and otherwise rejects them here, when it runs (dma_copy docs: the
    address check of a dynamic address happens "during execution")."""

    __slots__ = ()

    def _resolve(self, mask):
        bad = ~self.valid()
        if mask is not None and not isinstance(mask, bool):
            bad &= np.broadcast_to(mask, self._shape)
        if bad.any():
            idx = np.asarray(self.key[0])
            raise SimIndexError(
                "E008",
                "dma_copy",
                "oob_mode",
                f"the access pattern's runtime start puts elements [{int(idx.min())}, {int(idx.max())}] of it "
                f"outside the {self.src.size}-element tensor (oob_mode=error, the default)",
                "Pass oob_mode=nisa.oob_mode.skip to skip out-of-bounds addresses, or bound the offset",
            )
        return super()._resolve(mask)


class OutOfBoundsView(IndirectTensor):
    """An access pattern (``.ap``) with a fixed start that reaches outside its tensor.  Writing it is not an
    error; an instruction that reads or writes it is E008, at that instruction (nki-library
    output_projection_tkg.py builds the stationary view of a PSUM-bank tail before its `if h_2_idx < h_2_size:`
    decides not to use it).  ``oob_mode=skip`` does not apply: the address is not dynamic (dma_copy docs)."""

    __slots__ = ("arg", "message")
    out_of_bounds = True
    arg: str  # the argument and message of its E008
    message: str

    def valid(self) -> np.ndarray:
        return np.ones(self._shape, dtype=bool)  # nothing for oob_mode=skip to drop

    def _resolve(self, mask):
        raise SimIndexError("E008", "ap", self.arg, self.message, "Fix the pattern's strides/counts or offset")


def _index_values(t: Tensor, api: str, axis: int, rank: int) -> np.ndarray:
    """Integer values of an index tile, with trailing unit axes up to ``rank`` (partition-aligned)."""
    if t.buffer not in ON_CHIP:
        raise SimTypeError(
            "E007",
            api,
            "index",
            f"an index tensor must be an SBUF tile, got a tensor in '{t.buffer}'",
            "Load the indices first: idx = nl.load(idx_tensor) (2.26 nl.load docs: 'indices have to be in SBUF')",
        )
    if not _dt.is_int(t.dtype):
        raise SimTypeError(
            "E009",
            api,
            "index",
            f"index tile dtype {_dt.name_of(t.dtype)} is not an integer type",
            "Use int32/uint32 (e.g. nisa.iota(expr, dtype=nl.int32))",
        )
    v = np.asarray(t.read()).astype(np.int64)
    if v.ndim > rank:
        raise SimValueError(
            "E011",
            api,
            "index",
            f"index tile of shape {t.shape} has more axes than the indexed tensor ({rank})",
            "Use a (P, 1) index tile",
        )
    return v.reshape(v.shape + (1,) * (rank - v.ndim))


def _scalar_tiles_with_slices(base: Tensor, key: list, api: str) -> list:
    """``x[rank_tile[0, 0], :, :]``: one-element index tiles next to slices (vLLM-NKIPy's rank-slice add).  Each such
    tile is a runtime scalar index -- its axis is dropped, as an int's would be -- and each slice the integer range
    it selects (broadcast over the slice axes in order).  Index tiles of several elements next to slices mix basic
    and advanced indexing: ERR err_unsupported_mixing_basic_advanced_tensor_indexing (SDK 2.26 nki.errors.rst)."""
    if any(isinstance(k, Tensor) and k.size != 1 for k in key):
        raise NKISyntaxError(
            "E014",
            api,
            base.name,
            "Mixing basic tensor indexing and advanced tensor indexing is not supported: an index tile of several "
            "elements next to slices (err_unsupported_mixing_basic_advanced_tensor_indexing)",
            "Index the other axes with nl.arange expressions instead of slices",
        )
    axes = [a for a, k in enumerate(key) if k.__class__ is slice]
    out: list = []
    for a, k in enumerate(key):
        if k.__class__ is slice:
            r = np.arange(*k.indices(base.shape[a]), dtype=np.int64)
            shape = [1] * len(axes)
            shape[axes.index(a)] = r.size
            out.append(r.reshape(shape))
        elif isinstance(k, Tensor):
            out.append(k)  # read by _index_values below, as a scalar
        else:
            out.append(k)
    return out


def indirect_view(base: Tensor, key: list) -> IndirectTensor:
    """``base[key]`` where some entries of ``key`` are index tiles (the rest ints / integer index
    arrays the front end built)."""
    api = "index"
    rank = len(base.shape)
    parts, tiles = [], []
    scalar_tiles = any(k.__class__ is slice for k in key)
    if scalar_tiles:
        key = _scalar_tiles_with_slices(base, key, api)
    for axis, k in enumerate(key):
        if isinstance(k, Tensor):
            if axis and axis == rank - 1 and base.alloc.buffer not in ON_CHIP:
                # ERR err_indirect_indices_free_dim (SDK 2.26 nki.errors.rst): "Dynamic indexing for load/store
                # only supports the indirect indexing to be on the partition or block dimension" -- never on the
                # innermost (free) axis of the access
                raise NKISyntaxError(
                    "E014",
                    api,
                    base.name,
                    f"an index tile on axis {axis} of `{base.name}`: dynamic (indirect) indices "
                    "are supported only on the partition dimension (axis 0)",
                    "Gather rows instead: index axis 0 with the tile and the free axes with "
                    "nl.arange, then rearrange on chip",
                )
            v = _index_values(k, api, axis, rank)
            # a one-element tile next to slices is a scalar index (its axis dropped); else the tile's values
            parts.append(int(v.ravel()[0]) if scalar_tiles else v)
            tiles.append(k)
        else:
            parts.append(k)
    view = base.take(parts)
    out = IndirectTensor(view.alloc, src=view.src, key=view.key, par=view.par, shape=view.shape, off=view.off)
    out.index_tiles = tuple(tiles)
    out.from_mgrid = False
    return out


def check_load_store(api: str, t: object) -> None:
    """ERR err_indirect_indices_free_dim / KI "Indexing" (SDK 2.26): nl.load / nl.store take indirect indices
    built with nl.arange; "nl.mgrid won't work" (nisa.dma_copy's own examples use mgrid: not checked there)."""
    if isinstance(t, IndirectTensor) and t.from_mgrid:
        raise NKISyntaxError(
            "E014",
            api,
            t.name,
            "an indirect (runtime-indexed) access built with nl.mgrid fields: "
            "indirect load/store indexing needs nl.arange",
            "Build the other indices with nl.arange(n)[:, None] / nl.arange(n)[None, :]",
        )


def oob_mask(dst: Tensor, src: Tensor, m: MaskArg, oob_mode: Any, api: str, rmw: Any = None) -> MaskArg:
    """The DMA mask after ``oob_mode`` (2.26 dma_copy): ``skip`` drops out-of-bounds points."""
    mode = "error" if oob_mode is None else getattr(oob_mode, "name", oob_mode)
    if mode not in ("error", "skip"):
        raise SimValueError(
            "E011", api, "oob_mode", f"unknown oob_mode {oob_mode!r}", "Use nisa.oob_mode.error or nisa.oob_mode.skip"
        )
    if mode == "skip" and rmw is not None:
        raise SimValueError(
            "E011",
            api,
            "oob_mode",
            "dst_rmw_op allows only oob_mode=oob_mode.error (2.26 dma_copy docs)",
            "Drop oob_mode=skip or the read-modify-write",
        )
    if mode == "error" or m is False:
        return m
    for t in (dst, src):
        if isinstance(t, IndirectTensor) and t.shape == dst.shape:
            ok = t.valid()
            m = ok if m is None or m is True else (np.asarray(m) & ok)
    return m


# ---------------------------------------------------------------------------------------
# gathers
# ---------------------------------------------------------------------------------------


@op
def gather_flattened(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    indices: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nl.gather_flattened",
) -> Tensor | None:
    """``nl.gather_flattened``: per partition, ``out[p, j...] = data[p].ravel()[indices[p, j...]]``.

    2.26 language docs: data and indices 2-4-D, indices uint32, output shaped like indices;
    out-of-bounds indices give garbage on hardware -- here they are an error (E008)."""
    aname = "gather_flattened"
    _ops.tile(data, aname, "data")
    _ops.tile(indices, aname, "indices")
    for arg, t in (("data", data), ("indices", indices)):
        if not 2 <= t.ndim <= 4:
            raise SimValueError("E011", aname, arg, f"{arg} must be 2-, 3- or 4-dimensional, got shape {t.shape}")
    if not _dt.is_int(indices.dtype):
        raise SimTypeError(
            "E009",
            aname,
            "indices",
            f"indices must be uint32, got {_dt.name_of(indices.dtype)}",
            "Cast the indices to nl.uint32",
        )
    _ops.same_partitions(aname, data=data, indices=indices)
    P = data.shape[0]
    flat = data.read().reshape(P, -1)
    idx = np.asarray(indices.read()).astype(np.int64).reshape(P, -1)
    m = mask_array(mask, indices.shape, aname)
    sel = np.ones(idx.shape, bool) if m is None or m is True else np.broadcast_to(m, indices.shape).reshape(P, -1)
    bad = sel & ((idx < 0) | (idx >= flat.shape[1]))
    if bad.any():
        p, j = (int(v) for v in np.argwhere(bad)[0])
        raise _ops_oob(aname, idx[p, j], flat.shape[1])
    r = np.take_along_axis(flat, np.where(sel, idx, 0), axis=1).reshape(indices.shape)
    res = compute_result(
        np.ascontiguousarray(r),
        _dt.canonical(dtype, op=aname) if dtype is not None else data.dtype,
        op="gather_flattened",
        api=api,
        engine=POOL,
        inputs=(data, indices),
        mask=m,
        func="gather",
    )
    return emit(ctx, dst, res)


def _ops_oob(api, value, n):
    return SimIndexError(
        "E008",
        api,
        "indices",
        f"index {value} is out of bounds for a flattened free size of {n} (garbage on hardware)",
        "Keep every index below the data tile's free size",
        got=value,
        limit=n - 1,
    )


_LOCAL_GATHER_ELEMS = (1, 2, 4, 8, 16, 32)


@op
def local_gather(
    ctx: RunContext,
    dst: Dst,
    src_buffer: Tensor,
    index: Tensor,
    num_elem_per_idx: int = 1,
    num_valid_indices: int | None = None,
    *,
    mask: MaskArg = None,
    api: str = "nisa.local_gather",
    name: str | None = None,
) -> Tensor | None:
    """``nisa.local_gather`` on GpSimd: each 16-partition group gathers from itself.

    2.26 isa docs: per core (16 partitions), the indices of its ``index`` slice flattened
    partition-first (Fortran order) are element offsets into the group's flattened free
    axis; each selects ``num_elem_per_idx`` contiguous elements.  The golden reference in
    test_nki_isa_local_gather.py passes ``index * num_elem_per_idx`` and compares against
    ``np.take(src[group], indices, axis=1)`` on a (128, 512, 4) source."""
    aname = "local_gather"
    _ops.tile(src_buffer, aname, "src_buffer", buffers=("sbuf",))
    _ops.tile(index, aname, "index", buffers=("sbuf",))
    P = src_buffer.shape[0]
    if index.shape[0] != P:
        raise SimValueError(
            "E002",
            aname,
            "index",
            f"src_buffer and index must have the same number of partitions; got {P} and {index.shape[0]}",
            "Replicate the 16-partition index block to all partitions",
        )
    if P % 16:
        # ISA local_gather (SDK 2.26 isa docstring): the partition count must be a multiple of 16 (GpSimd cores)
        raise SimValueError(
            "E011",
            aname,
            "src_buffer",
            f"local_gather needs a multiple of 16 partitions, got {P}",
            "Use 16, 32, ..., 128 partitions (pad the tile)",
            got=P,
            limit="a multiple of 16",
        )
    if index.dtype != _dt.uint16:
        raise SimTypeError(
            "E009",
            aname,
            "index",
            f"indices must be uint16, got {_dt.name_of(index.dtype)}",
            "Cast the index tile to nl.uint16",
        )
    if int(num_elem_per_idx) not in _LOCAL_GATHER_ELEMS:
        raise SimValueError(
            "E011",
            aname,
            "num_elem_per_idx",
            f"num_elem_per_idx must be one of {_LOCAL_GATHER_ELEMS}, got {num_elem_per_idx}",
        )
    k = int(num_elem_per_idx)
    cores = P // 16
    per_core = index.size // cores
    nv = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < nv <= per_core or nv > 4096:
        raise SimValueError(
            "E011",
            aname,
            "num_valid_indices",
            f"num_valid_indices must be in 1..{min(per_core, 4096)} (the indices of one 16-partition slice), got {nv}",
        )
    src = src_buffer.read().reshape(P, -1)
    idx = np.asarray(index.read()).astype(np.int64).reshape(P, -1)
    n_free = src.shape[1]
    out = np.empty((P, nv, k), dtype=src.dtype)
    for c in range(cores):
        rows = slice(16 * c, 16 * (c + 1))
        ids = idx[rows].flatten(order="F")[:nv]
        starts = ids[:, None] + np.arange(k)[None, :]
        if starts.size and (starts.min() < 0 or starts.max() >= n_free):
            raise _ops_oob(aname, int(starts.max()), n_free)
        out[rows] = src[rows][:, starts]
    if nv == per_core and index.ndim == 2:
        # (P, F, 16, k): index column, partition of the 16-group, element -- the shape the
        # 2.26 example annotates (tensor[128, 4, 16, 4] for a (128, 4) index, k = 4)
        out = out.reshape(P, index.shape[1], 16, k)
    res = compute_result(
        out,
        src_buffer.dtype,
        op="local_gather",
        api=api,
        engine=POOL,
        inputs=(src_buffer, index),
        mask=mask_array(mask, out.shape, aname),
        func="gather",
    )
    return emit(ctx, dst, res)


# ---------------------------------------------------------------------------------------
# on-chip copies through runtime offsets
# ---------------------------------------------------------------------------------------


@op
def tensor_copy_dynamic_src(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    engine: object = None,
    api: str = "nisa.tensor_copy_dynamic_src",
    name: str | None = None,
) -> Tensor | None:
    """Copy an SBUF/PSUM tile whose free-axis offset is read from a tile at run time (SDK 2.26 isa
    ``tensor_copy_dynamic_src``; golden values ``nki/test/test_nki_isa_tensor_copy_dynamic.py`` at 49ee15c5:
    ``np.take`` of the offset columns).  The source is ``src[i_p, offsets[...] + i_f]`` (an indirect view);
    the offsets' tile is read too.  Vector, Scalar or GpSimd Engine (default VectorE)."""
    aname = "tensor_copy_dynamic_src"
    if not isinstance(src, Tensor):
        raise SimTypeError(
            "E010",
            aname,
            "src",
            f"expected a tile, got {type(src).__name__}",
            "Pass src[i_p, offset_tile[0, 0] + i_f] of an SBUF/PSUM tile",
        )
    _ops.tile(src, aname, "src", engine_access=False)
    eng = engine_for(engine, DVE, aname, ("src", src))
    res = copy_result(src, api=api, engine=eng, dtype=dtype, mask=mask)
    if isinstance(src, IndirectTensor) and src.index_tiles:
        res.extra_reads = tuple(t.region() for t in src.index_tiles)
    return emit(ctx, dst, res)


@op
def nc_n_gather(
    ctx: RunContext, dst: Dst, data: Tensor, indices: Tensor, *, api: str = "nisa.nc_n_gather", name: str | None = None
) -> Tensor | None:
    """NKI 0.6 isa ``nc_n_gather`` (aws-neuron-sdk 81ce03ae ``nki/api/nki/isa/__init__.py``): per partition,
    ``dst[p, j...] = data[p].ravel()[indices[p, j...]]`` on GpSimdE.  All three tiles in SBUF; ``indices``
    uint32; ``dst`` has ``data``'s dtype and as many elements per partition as ``indices``; index values in
    ``[0, data.size / data.shape[0])``."""
    aname = "nc_n_gather"
    _ops.tile(data, aname, "data", buffers=(SBUF,))
    _ops.tile(indices, aname, "indices", buffers=(SBUF,))
    if indices.dtype != _dt.uint32:
        raise SimTypeError(
            "E009",
            aname,
            "indices",
            f"indices must be uint32, got {_dt.name_of(indices.dtype)}",
            "Cast the indices to nl.uint32",
        )
    _ops.same_partitions(aname, data=data, indices=indices)
    P = data.shape[0]
    if isinstance(dst, Tensor):
        dst = _ops.tile(dst, aname, "dst", buffers=(SBUF,))
        if dst.dtype != data.dtype:
            raise SimTypeError(
                "E009",
                aname,
                "dst",
                f"dst dtype {_dt.name_of(dst.dtype)} must equal data dtype {_dt.name_of(data.dtype)}",
                "Allocate dst with data.dtype",
            )
        if dst.shape[0] != P or _ops.free_size(dst.shape) != _ops.free_size(indices.shape):
            raise SimValueError(
                "E011",
                aname,
                "dst",
                f"dst {tuple(dst.shape)} must have {P} partitions and "
                f"{_ops.free_size(indices.shape)} elements per partition (as indices)",
            )
    flat = data.read().reshape(P, -1)
    idx = np.asarray(indices.read()).astype(np.int64).reshape(P, -1)
    bad = (idx < 0) | (idx >= flat.shape[1])
    if bad.any():
        p, j = (int(v) for v in np.argwhere(bad)[0])
        raise _ops_oob(aname, idx[p, j], flat.shape[1])
    r = np.take_along_axis(flat, idx, axis=1).reshape(indices.shape)
    res = compute_result(
        np.ascontiguousarray(r),
        data.dtype,
        op="gather_flattened",
        api=api,
        engine=POOL,
        inputs=(data, indices),
        func="gather",
    )
    return emit(ctx, dst, res)


@op
def tensor_copy_dynamic_dst(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    engine: object = None,
    api: str = "nisa.tensor_copy_dynamic_dst",
    name: str | None = None,
) -> Tensor | None:
    """Copy an SBUF/PSUM tile to a destination whose free-axis offset is read from a tile at run time (SDK 2.26
    isa ``tensor_copy_dynamic_dst``): ``dst`` is ``t[i_p, offsets[...] + i_f]`` (an indirect view); same
    partitions and elements per partition as ``src``.  Vector, Scalar or GpSimd Engine (default VectorE)."""
    aname = "tensor_copy_dynamic_dst"
    _ops.tile(src, aname, "src")
    if not isinstance(dst, Tensor):
        raise SimTypeError(
            "E010",
            aname,
            "dst",
            f"expected a destination tile, got {type(dst).__name__}",
            "Pass dst=t[i_p, offset_tile[0, 0] + i_f] of an SBUF/PSUM tile",
        )
    dst = _ops.tile(dst, aname, "dst", engine_access=False)
    eng = engine_for(engine, DVE, aname, ("src", src))
    res = copy_result(src, api=api, engine=eng, dtype=dtype, mask=mask)
    if isinstance(dst, IndirectTensor) and dst.index_tiles:
        res.extra_reads = tuple(t.region() for t in dst.index_tiles)
    return emit(ctx, dst, res)
