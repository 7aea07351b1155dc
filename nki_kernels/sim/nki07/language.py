"""``nki.language`` (NKI 0.6/0.7) over the op core (docs/nki-0.7-spec.md §2, §5, §6).

Creation ops, buffers, dtypes, ``nl.load``/``nl.store``, the convenience compute ops (each returns a new
SBUF tile, ``nl.matmul``/``nl.transpose`` a PSUM tile; one registration line each), loops, SPMD/LNC ids.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import sys
import typing as _typing
from collections.abc import Mapping as _Mapping

import ml_dtypes
import numpy as np

from ..core import dma as _dma
from ..core import dtypes as dt
from ..core import limits
from ..core import reduce as _reduce
from ..core import rng as _rng
from ..core import spmd as _spmd
from ..core import tensore as _tensore
from ..core import vector as _vector
from ..core.context import current, enter, maybe_current
from ..core.enums import engine as _engine
from ..core.errors import NKISyntaxError, SimTypeError, SimValueError, not_implemented, partition_error
from ..core.loops import loop as _loop
from ..core.ops import BINARY as _BINARY
from ..core.ops import BITWISE as _BITWISE
from ..core.ops import PENDING as _PENDING
from ..core.ops import UNARY as _UNARY
from ..core.tensor import HBM_KINDS, ON_CHIP
from ..core.tensor import allocate as _allocate
from ..core.tensor import allocate_hbm as _allocate_hbm
from ..loopproof import prove as _prove
from ..loopproof import range_loop_site as _range_loop_site
from . import frontend as _frontend
from . import tensor as _tensor_mod
from .adapt import dst_first, module_getattr, returns_fresh, unwrap
from .isa import LoopRegister, VirtualRegister
from .scalar import INT32 as _INT32
from .scalar import NkiScalar as _NkiScalar
from .scalar import value_of as _value_of
from .tensor import REGIONS as _REGIONS
from .tensor import DynSlice, MemoryRegion, NkiTensor

if _typing.TYPE_CHECKING:  # not at run time: nki.language's public names are the NKI API's
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any, NoReturn, SupportsIndex, SupportsInt

# ---- dtypes ---------------------------------------------------------------------------------
float32, float16, bfloat16, tfloat32 = dt.float32, dt.float16, dt.bfloat16, dt.tfloat32
float8_e4m3, float8_e5m2 = dt.float8_e4m3, dt.float8_e5m2
# OCP E4M3FN: a NeuronCore-v4 dtype (ISA ``nc_matmul`` data types); tensors of it raise E018 on trn2
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
int8, uint8, int16, uint16, int32, uint32, bool_ = (
    dt.int8,
    dt.uint8,
    dt.int16,
    dt.uint16,
    dt.int32,
    dt.uint32,
    dt.bool_,
)
# nl.int64 (SDK 2.33: scalar_load / scalar_store tiles, NkiScalar width): named for NkiScalar; tensors of it are
# not modelled (E018, docs/nki-0.7-spec.md "Decisions")
int64 = np.dtype(np.int64)
# Packed x4 / MX scale dtypes exist as names; creating a tensor of them raises E018 (not modelled).
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4, float8_e8m0fnu = (
    "float8_e5m2_x4",
    "float8_e4m3fn_x4",
    "float4_e2m1fn_x4",
    "float8_e8m0fnu",
)


class _Limits:
    def __init__(self, mn, mx):
        self.min, self.max = mn, mx


fp32 = _Limits(float(np.float32(np.finfo(np.float32).min)), float(np.finfo(np.float32).max))
bfp16 = _Limits(float("-inf"), float("inf"))  # 0xff80 decodes as bf16 -inf (spec §3)


# ---- buffers (T2) ---------------------------------------------------------------------------
sbuf, psum, hbm = MemoryRegion.sbuf, MemoryRegion.psum, MemoryRegion.hbm
private_hbm, shared_hbm = MemoryRegion.private_hbm, MemoryRegion.shared_hbm


def _buf(buffer, api):
    if buffer is None:
        return "sbuf"
    if isinstance(buffer, MemoryRegion):
        return buffer.value
    if isinstance(buffer, str):
        raise SimTypeError(
            "E007",
            api,
            "buffer",
            f"string buffer names are not supported (got {buffer!r})",
            f"Use nl.{buffer}" if buffer in _REGIONS else "Use nl.sbuf, nl.psum or nl.shared_hbm",
        )
    raise SimTypeError(
        "E007",
        api,
        "buffer",
        f"unknown buffer {buffer!r}",
        "Use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm",
    )


def is_hbm(buffer: MemoryRegion | None) -> bool:
    return _buf(buffer, "is_hbm") in HBM_KINDS


def is_on_chip(buffer: MemoryRegion | None) -> bool:
    return _buf(buffer, "is_on_chip") in ON_CHIP


def is_psum(buffer: MemoryRegion | None) -> bool:
    return _buf(buffer, "is_psum") == "psum"


def is_sbuf(buffer: MemoryRegion | None) -> bool:
    return _buf(buffer, "is_sbuf") == "sbuf"


class _TileSize:
    """Hardware tile limits on trn2 (``nki.language.tile_size``; values as in the 0.1 spec §3)."""

    pmax = limits.PMAX
    psum_fmax = limits.PSUM_FMAX
    psum_bank_fmax = limits.PSUM_FMAX
    psum_bank_fmax_bytes = limits.PSUM_BANK_BYTES
    psum_num_banks = limits.PSUM_BANKS
    gemm_stationary_fmax = limits.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = limits.GEMM_MOVING_FMAX
    bn_stats_fmax = limits.BN_STATS_FMAX
    psum_min_align = 4
    sbuf_min_align = 1
    total_available_sbuf_size = limits.SBUF_BYTES_PER_PARTITION
    sbuf_fmax_bytes = limits.SBUF_BYTES_PER_PARTITION
    sbuf_fmax = limits.SBUF_BYTES_PER_PARTITION // 4
    sbuf_size_bytes = limits.SBUF_BYTES_PER_PARTITION * limits.PMAX


tile_size = _TileSize()


# ---- creation (T1-T3) -------------------------------------------------------------------------
def _shape(shape: Any, api: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(shape)
    for s in shape:
        if type(s).__name__ == "ParDim":
            raise SimTypeError(
                "E010",
                api,
                "shape",
                "block dimensions (nl.par_dim) were removed: the partition dimension is the leftmost dimension",
                "Use a list of tiles or fold the block "
                "dimension into the free dimensions (see the NKI block-dimension migration guide)",
            )
    return tuple(int(s) for s in shape)


def ndarray(
    shape: int | Sequence[int],
    dtype: Any = float32,
    buffer: MemoryRegion | None = sbuf,
    name: str = "",
    address: tuple[int, int] | None = None,
    **kw: Any,
) -> NkiTensor:
    """Uninitialised tensor (poisoned in the interpreter); ``address`` places it (``_placed``)."""
    ctx = enter("ndarray", instruction=False)
    b = _buf(buffer, "ndarray")
    shape = _shape(shape, "ndarray")
    if b in HBM_KINDS:
        return NkiTensor(
            _allocate_hbm(ctx, shape, dtype, b, api="ndarray", name=name, kernel_level_rule=False, hbm_is_private=True)
        )
    t = _allocate(
        shape, dtype, b, api="ndarray", name=name, track=address is None, psum_banks_rule="nki07.psum_multi_bank"
    )
    if address is not None:
        _placed(t, address, b)
    return NkiTensor(t)


def _placed(t, address, b):
    """``address=(partition_offset, free_offset_bytes)`` (MIG "Improved allocation API"): the kernel
    places the tensor itself (nki-library's allocators reuse addresses), so it is not counted as a new
    live allocation; it must fit the partitions and the buffer's per-partition bytes."""
    api = "ndarray"
    current(api).trace.placed_allocs.add(t.alloc.id)
    try:
        p0, f0 = (int(a) for a in address)
    except (TypeError, ValueError):
        raise SimValueError(
            "E011", api, "address", f"address must be (partition_offset, free_offset), got {address!r}"
        ) from None
    limit = limits.SBUF_BYTES_PER_PARTITION if b == "sbuf" else limits.PSUM_BYTES_PER_PARTITION
    end = f0 + t.alloc.bytes_per_partition
    if p0 < 0 or p0 + t.shape[0] > limits.PMAX:
        raise partition_error(api, "address", p0 + t.shape[0])
    if f0 < 0 or end > limit:
        raise SimValueError(
            "E006" if b == "sbuf" else "E005",
            api,
            "address",
            f"the tensor at free offset {f0} ends at byte {end} of a {limit}-byte partition",
            "Place it lower or make it smaller",
            got=end,
            limit=limit,
        )
    if b == "psum" and f0 % limits.PSUM_BANK_BYTES:
        raise SimValueError(
            "E004",
            api,
            "address",
            f"PSUM allocations start at a bank boundary (multiple of {limits.PSUM_BANK_BYTES} bytes), got {f0}",
        )


def _filled(api, shape, dtype, buffer, name, value):
    ctx = enter(api)
    b = _buf(buffer, api)
    shape = _shape(shape, api)
    if b in HBM_KINDS:
        raise NKISyntaxError(
            "E013",
            api,
            "buffer",
            "Creating HBM tensor with init value is not supported",
            "Use nl.ndarray for HBM tensors and write them with nl.store / dma_copy",
        )
    t = _allocate(shape, dtype, b, api=api, name=name, fill=value)
    _vector.fill(ctx, t, api=f"nl.{api}")
    if ctx.recorder is not None:  # a loop body being traced (core/program.py)
        ctx.recorder.filled(t, f"nl.{api}")
    return NkiTensor(t)


def zeros(
    shape: int | Sequence[int], dtype: Any = float32, buffer: MemoryRegion | None = sbuf, name: str = "", **kw: Any
) -> NkiTensor:
    return _filled("zeros", shape, dtype, buffer, name, 0)


def ones(
    shape: int | Sequence[int], dtype: Any = float32, buffer: MemoryRegion | None = sbuf, name: str = "", **kw: Any
) -> NkiTensor:
    return _filled("ones", shape, dtype, buffer, name, 1)


def full(
    shape: int | Sequence[int],
    fill_value: Any,
    dtype: Any = float32,
    buffer: MemoryRegion | None = sbuf,
    name: str = "",
    **kw: Any,
) -> NkiTensor:
    return _filled("full", shape, dtype, buffer, name, fill_value)


def _like(x, dtype, buffer):
    return x.shape, (x.dtype if dtype is None else dtype), (buffer if buffer is not None else x.buffer)


def zeros_like(
    x: NkiTensor, dtype: Any = None, buffer: MemoryRegion | None = None, name: str = "", **kw: Any
) -> NkiTensor:
    s, d, b = _like(x, dtype, buffer)
    return zeros(s, d, buffer=b, name=name)


def ones_like(
    x: NkiTensor, dtype: Any = None, buffer: MemoryRegion | None = None, name: str = "", **kw: Any
) -> NkiTensor:
    s, d, b = _like(x, dtype, buffer)
    return ones(s, d, buffer=b, name=name)


def full_like(
    x: NkiTensor, fill_value: Any, dtype: Any = None, buffer: MemoryRegion | None = None, name: str = "", **kw: Any
) -> NkiTensor:
    s, d, b = _like(x, dtype, buffer)
    return full(s, fill_value, d, buffer=b, name=name)


def empty_like(
    x: NkiTensor, dtype: Any = None, buffer: MemoryRegion | None = None, name: str = "", **kw: Any
) -> NkiTensor:
    s, d, b = _like(x, dtype, buffer)
    return ndarray(s, d, buffer=b, name=name)


ndarray_like = empty_like


# aws-neuron-sdk 81ce03ae nki/api/nki/language/__init__.py shared_constant: "Supported element types"
_CONSTANT_DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "int32",
    "int16",
    "int8",
    "uint32",
    "uint16",
    "uint8",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
)


def _constant_array(constant: Any) -> np.ndarray:
    """``shared_constant``'s data: a NumPy array, or the path of a ``.npy`` file (the same docstring: "Can be a
    numpy array or a file path to a ``.npy`` file"; nki-library's rotational topk passes paths)."""
    if isinstance(constant, (str, os.PathLike)):
        try:
            a = np.load(os.fspath(constant), allow_pickle=False)
        except (OSError, ValueError) as e:
            raise SimValueError(
                "E011",
                "shared_constant",
                "constant",
                f"cannot read {os.fspath(constant)!r} as a .npy file ({e})",
                "Pass a NumPy array or the path of a file written by numpy.save",
            ) from None
    else:
        a = np.asarray(constant)
    name = a.dtype.name
    if name not in _CONSTANT_DTYPES:
        raise SimValueError(
            "E018",
            "shared_constant",
            "constant",
            f"element type {name} is not one shared_constant supports",
            f"Convert it first (e.g. .astype(np.float32)); supported: {', '.join(_CONSTANT_DTYPES)}",
        )
    return a


def shared_constant(constant: Any, dtype: Any = None, **kw: Any) -> NkiTensor:
    enter("shared_constant", instruction=False)
    a = _constant_array(constant)
    t = _allocate(a.shape, dtype if dtype is not None else a.dtype, "hbm", api="shared_constant")
    t.write(a)
    return NkiTensor(t)


def shared_identity_matrix(n: int, dtype: Any = uint8, dst: NkiTensor | None = None, **kw: Any) -> NkiTensor:
    """An (n, n) identity tile in SBUF (NL ``shared_identity_matrix``: its examples feed the result
    straight to ``nl.transpose``/``nl.matmul``), or written into ``dst``."""
    ctx = enter("shared_identity_matrix")
    r = _vector.identity(ctx, _PENDING if dst is None else dst.t, int(n), dtype, api="nl.shared_identity_matrix")
    return dst if dst is not None else NkiTensor(r)


def rand(
    shape: int | Sequence[int], dtype: Any = float32, buffer: MemoryRegion | None = sbuf, name: str = "", **kw: Any
) -> NkiTensor:
    """Uniform [0, 1) values (NL ``rand``).  The interpreter's generator is NumPy's PCG64 seeded by
    ``random_seed`` (0 by default): the same seed gives the same values, not the hardware's values."""
    ctx = enter("rand")
    return NkiTensor(_rng.rand(ctx, _PENDING, _shape(shape, "rand"), dtype, buffer=_buf(buffer, "rand")))


def random_seed(seed: NkiTensor) -> None:
    """Seed ``nl.rand`` from a (1, 1) SBUF/PSUM tensor (NL ``random_seed``)."""
    ctx = enter("random_seed")
    if not isinstance(seed, NkiTensor) or seed.size != 1:
        raise SimTypeError(
            "E010",
            "random_seed",
            "seed",
            "the seed is a (1, 1) tensor on SBUF or PSUM",
            "nl.random_seed(nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf))",
        )
    _rng.random_seed(ctx, None, seed.t)


def dropout(x: NkiTensor, rate: Any, dtype: Any = None) -> NoReturn:
    raise not_implemented("nki.language.dropout")


def gather_flattened(data: NkiTensor, indices: NkiTensor, axis: int = 0, dtype: Any = None) -> NoReturn:
    raise not_implemented("nki.language.gather_flattened")


# ---- SPMD / LNC (K4) -----------------------------------------------------------------------------
def program_id(axis: int = 0) -> int:
    return _spmd.program_id(axis)


def num_programs(axes: int | tuple[int, ...] | list[int] | None = 0) -> int | tuple[int, ...]:
    return _spmd.num_programs(axes)


def program_ndim() -> int:
    return _spmd.program_ndim()


# ---- loops (C1-C4) -------------------------------------------------------------------------------
def affine_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    """C1: Python's range (the body runs per iteration); a loop program where its source proves the iterations run
    the same Python (sim/loopproof.py)."""
    return _loop("affine", (start,) if stop is None else (start, stop, step), *_prove(sys._getframe(1), _TENSORS))


def sequential_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    return _loop("sequential", (start,) if stop is None else (start, stop, step), *_prove(sys._getframe(1), _TENSORS))


def static_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    return _loop("static", (start,) if stop is None else (start, stop, step), *_prove(sys._getframe(1), _TENSORS))


_TENSORS = (NkiTensor,)  # what a subscripted name of a loop program's body holds (loopproof.py)


def kernel_range(*args: SupportsIndex) -> Iterator[int] | range:
    """``range`` as an NKI 0.7 kernel function sees it (nki07/kernel.py): Python's ``range`` (C1), and the iterator
    of a ``for`` statement there may run as a loop program where its source proves the iterations alike
    (sim/loopproof.py); without a loop frame in its events, as Python's own loop (core/loops.py kind "range")."""
    r = builtins.range(*args)
    f = sys._getframe(1)
    if maybe_current() is None or not _range_loop_site(f):
        return r
    return _loop("range", (r.start, r.stop, r.step), *_prove(f, _TENSORS))


def dynamic_range(start: SupportsInt, stop: SupportsInt | None = None, step: SupportsInt = 1) -> Iterator[LoopRegister]:
    """C4: removed in NKI 0.7 (MIG 0.6->0.7, SDK 2.33.1 ``nki/migration/index``: the release "removes the
    dynamic loop constructs deprecated in NKI 0.6.0"): E015 naming ``nl.fori_loop``.  Under
    ``NKI_COMPILER_FRONTEND=custom`` (the 0.6 specialization, K9) it runs, deprecated, as in NKI 0.6."""
    ctx = enter("dynamic_range", instruction=False)
    if not _frontend.custom():
        raise SimValueError(
            "E015",
            "dynamic_range",
            None,
            "nl.dynamic_range was removed in NKI 0.7 (SDK 2.33): the tracing specialization cannot build a "
            "loop from a register in a Python `for`",
            "Move the body into a function and call nl.fori_loop(lower, upper, body) (or set "
            "NKI_COMPILER_FRONTEND=custom while migrating, deprecated in 2.33)",
        )
    ctx.warn_once("dynrange", "nl.dynamic_range is deprecated since NKI 0.6: use nl.fori_loop (MIG 0.5->0.6)")
    lo = _value_of(start, "dynamic_range")
    r = (
        builtins.range(lo)
        if stop is None
        else builtins.range(lo, _value_of(stop, "dynamic_range"), _value_of(step, "dynamic_range"))
    )
    for i in _loop("sequential", (r.start, r.stop, r.step)):
        yield LoopRegister(i)


_NO_REORDER = [0]  # depth of nested nl.no_reorder() blocks being executed


def _not_in_no_reorder(api):
    # MIG 0.5->0.6 "Rules for migrated loops" (aws-neuron-sdk 81ce03ae nki/migration/index.rst): fori_loop and
    # while_loop cannot sit inside an nl.no_reorder() block
    if _NO_REORDER[0]:
        raise SimValueError(
            "E015",
            api,
            None,
            f"nl.{api} inside an nl.no_reorder() block: runtime loops cannot sit in a no_reorder block",
            f"Put the no_reorder block inside the {api} body, or the loop after the block",
        )


def _bound(x: Any, arg: str) -> int:
    """A fori_loop bound's value.  SDK 2.33.0 ``nki.language.fori_loop``: a bound is an int, a VirtualRegister
    or an NkiScalar, and "must be 32-bit: the loop compiles into a compare-and-branch that has no 64-bit form"."""
    if isinstance(x, _NkiScalar) and x.dtype != _INT32:
        raise SimTypeError(
            "E009",
            "fori_loop",
            arg,
            f"an nl.int64 scalar cannot bound a fori_loop (its trip-count comparison has no 64-bit form): {x!r}",
            "Bound the loop with an nl.int32 scalar; a 64-bit scalar can still be computed inside the body",
        )
    if not isinstance(x, (int, np.integer, _NkiScalar)) and not hasattr(x, "__nki_register__"):
        raise SimTypeError(
            "E010",
            "fori_loop",
            arg,
            f"a bound is an int, a VirtualRegister or an NkiScalar, got {type(x).__name__}",
            "Load a runtime bound with nisa.scalar_load (or nisa.register_load)",
        )
    return _value_of(x, "fori_loop")


def fori_loop(lower: SupportsInt, upper: SupportsInt, body_fun: Callable[[Any], object], step: int = 1) -> None:
    """Runtime loop (C2): ``body_fun(i)`` for i in range(lower, upper, step); returns None.  ``i`` is passed by
    value: an NkiScalar (nl.int32) unless a bound is a VirtualRegister, then a VirtualRegister (SDK 2.33.0
    ``nki.language.fori_loop``); under NKI_COMPILER_FRONTEND=custom a read-only register, as in NKI 0.6."""
    _not_in_no_reorder("fori_loop")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise SimValueError("E011", "fori_loop", "step", f"step must be a positive compile-time int, got {step!r}")
    lo, hi = _bound(lower, "lower"), _bound(upper, "upper")
    custom = _frontend.custom()
    register = custom or hasattr(lower, "__nki_register__") or hasattr(upper, "__nki_register__")
    for i in _loop("sequential", (lo, hi, int(step))):
        r = body_fun(LoopRegister(i, frozen=custom) if register else _NkiScalar(i, _INT32))
        if r is not None:
            raise SimValueError(
                "E011",
                "fori_loop",
                "body_fun",
                "the fori_loop body cannot return a value",
                "Carry loop state in SBUF/HBM tensors",
            )
    return None


def while_loop(init: SupportsInt, body_fun: Callable[[VirtualRegister], SupportsInt]) -> None:
    """Runtime while loop (C3): runs while the condition register is non-zero."""
    _not_in_no_reorder("while_loop")
    r = init
    n = 0
    while _value_of(r, "while_loop") != 0:
        r = body_fun(VirtualRegister(_value_of(r, "while_loop")))
        if not hasattr(r, "__nki_register__") and not isinstance(r, (int, np.integer, _NkiScalar)):
            raise SimValueError(
                "E011",
                "while_loop",
                "body_fun",
                "the while_loop body must return the next condition register",
                "End the body with `return r`",
            )
        n += 1
        if n > 10_000_000:  # pragma: no cover - a guard, not a semantic
            raise SimValueError("E011", "while_loop", None, "more than 10^7 iterations")
    return None


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Scheduling hint: instructions in the block keep program order (the interpreter always does)."""
    _NO_REORDER[0] += 1
    try:
        yield
    finally:
        _NO_REORDER[0] -= 1


# ---- indexing helpers ----------------------------------------------------------------------------
def ds(start: Any, size: int, step: int = 1) -> DynSlice:
    return DynSlice(start, size, step)


def expand_dims(x: NkiTensor, axis: int) -> NkiTensor:
    return x.expand_dim(axis)


# ---- data movement (L2) ----------------------------------------------------------------------------
load = returns_fresh(_dma.load, api="nl.load")
store = dst_first(_dma.store, name="store", api="nl.store")
load_transpose2d = returns_fresh(_dma.load_transpose2d)
# RN 0.6: nl.copy uses tensor_copy, on VectorE
copy = returns_fresh(_vector.tensor_copy, name="copy", api="nl.copy", engine=_engine.vector)
copy._nki_op = "copy"  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
broadcast_to = returns_fresh(_vector.broadcast_to)


def _matmul(x, y, transpose_x=False, **kw):
    if not transpose_x:
        current("matmul").warn_once(
            "nlmatmul",
            "nl.matmul without transpose_x=True fails to compile on "
            "hardware (NKI 0.5/0.6 known issue); pass a pre-transposed x",
        )
    return (x, y, transpose_x), kw


matmul = returns_fresh(_tensore.matmul, convert=_matmul)
transpose = returns_fresh(_tensore.transpose)


def device_print(print_prefix: str, tensor: Any = None, **kw: Any) -> None:
    enter("device_print", instruction=False)
    v = unwrap(tensor)
    print(print_prefix, np.asarray(v.read()).astype(np.float32) if hasattr(v, "read") else v, file=sys.stdout)


# ---- elementwise ops (L1, L3, L4) -------------------------------------------------------------------
def _unary(name):
    f = returns_fresh(_vector.unary, name=name, api=f"nl.{name}", pre=(name,))
    f._nki_op = name
    return f


_NO_BCAST_WARN = ("abs_max", "abs_min")  # NL abs_max / abs_min examples broadcast a (P, 1) operand


def _binary_args(name):
    def convert(x, y, **kw):
        if x.__class__ is not y.__class__ and (x is None or y is None):
            raise SimTypeError("E010", name, "y" if y is None else "x", "operand is None")
        if hasattr(x, "_shape") and hasattr(y, "_shape") and x._shape != y._shape and name not in _NO_BCAST_WARN:
            current(name).warn_once(
                "nlbcast",
                f"nl.{name} of tiles {x.shape} and {y.shape}: binary nl.* ops do "
                "not support broadcasting on hardware (NKI 0.5/0.6 known issue)",
            )
        if name == "divide" and (hasattr(x, "_shape") or hasattr(y, "_shape")):
            current("divide").warn_once(
                "nldivide",
                "nl.divide is not supported on hardware (NKI 0.5/0.6 known "
                "issue); use nl.multiply(x, nl.reciprocal(y))",
            )
        return (x, y), kw

    return convert


def _binary(name):
    core = returns_fresh(_vector.binary, name=name, api=f"nl.{name}", pre=(name,), convert=_binary_args(name))

    def op(x, y, dtype=None, **kw):
        if (x is None or y is None) and name in ("equal", "not_equal"):
            return (x is y) == (name == "equal")
        return core(x, y, dtype=dtype)

    op.__name__ = name
    op._nki_op = name
    return op


_mod = sys.modules[__name__]
for _n in _UNARY:
    if _n not in ("identity", "copy"):
        setattr(_mod, _n, _unary(_n))
for _n in list(_BINARY) + list(_BITWISE):
    if _n not in ("max", "min"):
        setattr(_mod, _n, _binary(_n))
bypass = copy
prelu = "prelu"  # an activation-function name; nisa.activation(op=nl.prelu) raises E021
average = "average"
where = returns_fresh(_vector.where)


# ---- reductions (L6) -----------------------------------------------------------------------------------
def _reduction(name, nki_op=None):
    f = returns_fresh(_reduce.reduce, name=name, api=f"nl.{name}", pre=(name,))
    f._nki_op = nki_op or name
    return f


sum = _reduction("sum", "add")
max = _reduction("max", "max")
min = _reduction("min", "min")
mean = _reduction("mean")
prod = _reduction("prod", "multiply")
var = _reduction("var")
all = _reduction("all")
softmax = returns_fresh(_reduce.softmax, convert=lambda x, axis=-1, **kw: ((x, axis), kw))
rms_norm = returns_fresh(
    _reduce.rms_norm,
    convert=lambda x, w, axis, n, epsilon=1e-06, compute_dtype=None, **kw: ((x, w, axis, n, epsilon), kw),
)


def _is_field_value(name: str, value: object) -> bool:
    """A class-body attribute that is a data field (not a method, property, nested class or dunder)."""
    if name.startswith("__") or isinstance(value, (staticmethod, classmethod, property, type)):
        return False
    return not callable(value)


def _body_order(body: _Mapping[str, object], annotated: list[str]) -> list[str]:
    """A class body's field names in definition order.  An annotation without a value is not in the body: it
    follows the annotated name before it (the first ones sit where ``__annotations__`` was created)."""

    def bare_after(k: int) -> list[str]:
        rest = annotated[k:]
        end = next((j for j, a in enumerate(rest) if a in body), len(rest))
        return rest[:end]

    order: list[str] = []
    for name, value in body.items():
        if name == "__annotations__":
            order += bare_after(0)
        elif name in annotated:
            order += [name, *bare_after(annotated.index(name) + 1)]
        elif _is_field_value(name, value):
            order.append(name)
    return order


def nkiobject_fields(cls: type) -> list[tuple[str, object]]:
    """The fields of an NKIObject class and their defaults, bases first, each class in body order.

    aws-neuron-sdk 81ce03ae nki/get-started/nki-language-guide.rst "Class Support": every NKI class is
    like a data class; with or without ``@dataclass`` the compiler writes ``__init__(self, x=None, y=False)``
    over the class's fields (no default: None) and a ``__post_init__``.  Fields are the annotated names and,
    as nki-library's kernels rely on (``SectionParams`` in core/attention/attention_cte.py, d2ad3a5: class
    attributes without annotations, built with keywords), the plain data attributes of the class body."""
    fields: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass is NKIObject:
            continue
        body = vars(klass)
        annotated = [n for n in body.get("__annotations__", {}) if not n.startswith("__")]
        dc = {f.name: f for f in dataclasses.fields(klass)} if dataclasses.is_dataclass(klass) else {}

        order = _body_order(body, annotated)
        for name in order:
            f = dc.get(name)
            if f is not None and f.default_factory is not dataclasses.MISSING:
                fields[name] = f.default_factory
            elif f is not None:
                fields[name] = None if f.default is dataclasses.MISSING else f.default
            else:
                value = body.get(name)
                fields[name] = None if isinstance(value, dataclasses.Field) else value
    return list(fields.items())


def _user_init(cls: type) -> bool:
    """Whether a class below NKIObject writes its own ``__init__`` (one ``@dataclass`` made does not count)."""
    for klass in cls.__mro__:
        if klass is NKIObject:
            return False
        init = vars(klass).get("__init__")
        if init is not None:
            code = getattr(init, "__code__", None)
            return not (code is not None and code.co_filename == "<string>" and "__dataclass_fields__" in vars(klass))
    return False


class _NKIObjectType(type):
    """Constructs an NKIObject class without an ``__init__`` of its own as the 0.7 compiler does (see
    :func:`nkiobject_fields`): positional or keyword values for its fields, the rest their defaults,
    then ``__post_init__``.  A ``@dataclass(frozen=True)`` class is built too (SDK 2.33 release notes,
    release-notes/components/nki.rst: frozen NKIObject dataclasses construct normally)."""

    def __call__(cls, *args: object, **kwargs: object) -> object:
        if _user_init(cls):
            return super().__call__(*args, **kwargs)
        fields = nkiobject_fields(cls)
        names = [n for n, _ in fields]
        if len(args) > len(fields):
            raise TypeError(
                f"{cls.__name__}() takes {len(fields)} field values ({', '.join(names)}), {len(args)} given"
            )
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise TypeError(f"{cls.__name__}() has no field {unknown[0]!r}; its fields: {', '.join(names) or 'none'}")
        twice = [n for n in names[: len(args)] if n in kwargs]
        if twice:
            raise TypeError(f"{cls.__name__}() got field {twice[0]!r} both by position and by keyword")
        dc: dict[str, dataclasses.Field[Any]] = (
            {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        )
        # cls is a class: cls.__new__ is its own (object's), which mypy looks up on the metaclass (type.__new__)
        obj = cls.__new__(cls)  # type: ignore[call-overload]
        for k, (name, default) in enumerate(fields):
            if k < len(args):
                value = args[k]
            elif name in kwargs:
                value = kwargs[name]
            elif name in dc and (factory := dc[name].default_factory) is not dataclasses.MISSING:
                value = factory()
            else:
                value = default
            object.__setattr__(obj, name, value)
        post = getattr(obj, "__post_init__", None)
        if post is not None:
            post()
        return obj


class NKIObject(metaclass=_NKIObjectType):
    """Base of the user classes an NKI 0.7 kernel may take or build (aws-neuron-sdk 81ce03ae
    nki/get-started/nki-language-guide.rst "Class Support": a class used in a kernel inherits from NKIObject and
    no other class); kernel arguments of other user classes are E010 (nki07/kernel.py).  Constructed like a
    data class with or without ``@dataclass`` (:class:`_NKIObjectType`)."""


tensor = NkiTensor

# the tensor operators map to nl.* (tensor.NL)
_tensor_mod.NL.update({n: v for n, v in dict(globals()).items() if callable(v) and not n.startswith("_")})
__getattr__ = module_getattr("nki.language")
