"""``neuronxcc.nki.language`` (nl, NKI 0.1, SDK 2.26) over the op core: creation, data movement,
elementwise and reduction ops (one registration line each), loops, indexing helpers (spec §3-§7,
§10, §11)."""

from __future__ import annotations

import ast as _ast
import dis as _dis
import sys
from typing import TYPE_CHECKING as _TYPE_CHECKING

import ml_dtypes as _ml_dtypes
import numpy as np

from ..core import dma as _dma
from ..core import dtypes as _dt
from ..core import indirect as _indirect
from ..core import limits as _limits
from ..core import ops as _ops_tables
from ..core import reduce as _reduce
from ..core import rng as _rng
from ..core import select as _select
from ..core import spmd as _spmd
from ..core import tensore as _tensore
from ..core import vector as _vector
from ..core.context import enter as _enter
from ..core.context import lenient
from ..core.context import maybe_current as _maybe_current
from ..core.context import unproven as _unproven
from ..core.errors import NKISyntaxError, SimTypeError, SimValueError, not_implemented
from ..core.errors import user_frame as _user_frame
from ..core.loops import loop as _loop
from ..core.ops import PENDING as _PENDING
from ..core.tensor import Tensor as _Tensor
from ..core.tensor import allocate as _allocate
from ..core.tensor import allocate_hbm as _allocate_hbm
from ..core.trace import ACT as _ACT
from ..kernel_ast import _lookup
from ..loopproof import prove as _prove
from . import allocation as _alloc
from . import tile as _tile_mod
from .adapt import returns_fresh, with_dst
from .indexing import IndexExpr, _MGridMaker
from .indexing import mask_value as _mask_value
from .symbolic import bound_args as _bound_args
from .symbolic import program_index as _program_index
from .symbolic import reject_in_shape as _reject_in_shape
from .symbolic import symbolic as _symbolic
from .symbolic import symbolic_range_site as _symbolic_range_site
from .symbolic import traced_once as _traced_once
from .tile import ParDim, Tile

if _TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, NoReturn

    from ..core.tensor import Tensor
    from .symbolic import Index

# ---- dtypes -------------------------------------------------------------------------------
float32, float16, bfloat16, tfloat32 = _dt.float32, _dt.float16, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e5m2
int8, uint8, int16, uint16, int32, uint32, bool_ = (
    _dt.int8,
    _dt.uint8,
    _dt.int16,
    _dt.uint16,
    _dt.int32,
    _dt.uint32,
    _dt.bool_,
)


class _Limits:
    def __init__(self, mn, mx):
        self.min, self.max = mn, mx


fp32 = _Limits(float(np.float32(np.finfo(np.float32).min)), float(np.finfo(np.float32).max))
bfp16 = _Limits(float("-inf"), float("inf"))  # 0xff80 decodes as bf16 -inf (spec §3)


def static_cast(x: Any, dtype: Any) -> Tensor | np.ndarray:
    """Cast a NumPy array (also outside kernels) or a tile to ``dtype``."""
    if isinstance(x, Tile):
        return copy(x, dtype=dtype)
    d = _dt.canonical(dtype, op="static_cast")
    out = np.empty(np.shape(x), dtype=_dt.storage_dtype(d, "hw"))
    _dt.cast_into(out, np.asarray(x, dtype=np.float32) if np.asarray(x).dtype.kind == "f" else np.asarray(x), d)
    return out


# ---- buffers ------------------------------------------------------------------------------
class Buffer:
    """A memory buffer (nl.sbuf, nl.psum, ...).  ``phys_tiles``: the number of physical tiles a
    ``mod_alloc`` gives a block-dimension tensor (None: automatic allocation)."""

    def __init__(self, name: str, phys_tiles: int | None = None, placement: _alloc.Placement | None = None):
        self.name = name
        self.phys_tiles = phys_tiles
        self.placement = placement  # allocation.Placement of a direct allocation (None: automatic)

    def __repr__(self) -> str:
        return f"nl.{self.name}" if self.phys_tiles is None else f"nl.{self.name}.mod_alloc({self.phys_tiles} tiles)"

    def mod_alloc(self, *args: Any, **kwargs: Any) -> Buffer:
        """Modulo allocation (SDK 2.26 nki.compiler psum.mod_alloc / sbuf.mod_alloc): capacity counts the
        physical tiles, the product of ``num_*_tiles`` (an empty shape is one tile, as the SDK's
        test_psum_modulo_alloc example defines it); the placement is checked by nki01/allocation.py."""
        if args and "base_addr" not in kwargs:
            kwargs = dict(kwargs, base_addr=args[0])
        placement = _alloc.mod_alloc_placement(self.name, kwargs)
        return Buffer(self.name, placement.tiles(), placement)

    def auto_alloc(self, *args: Any, **kwargs: Any) -> Buffer:
        return self


sbuf, psum, hbm = Buffer("sbuf"), Buffer("psum"), Buffer("hbm")
shared_hbm, private_hbm = Buffer("shared_hbm"), Buffer("private_hbm")


def _buffer_name(buffer, api):
    if buffer is None:
        return "sbuf"
    if isinstance(buffer, Buffer):
        return buffer.name
    if isinstance(buffer, str) and buffer in ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm"):
        return buffer
    raise SimTypeError(
        "E007",
        api,
        "buffer",
        f"unknown buffer {buffer!r}",
        "Use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm",
    )


class tile_size:
    """Hardware tile limits on trn2 (spec §3)."""

    pmax = _limits.PMAX
    psum_fmax = _limits.PSUM_FMAX
    gemm_stationary_fmax = _limits.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = _limits.GEMM_MOVING_FMAX
    bn_stats_fmax = _limits.BN_STATS_FMAX
    psum_min_align = 4
    sbuf_min_align = 1
    total_available_sbuf_size = _limits.SBUF_BYTES_PER_PARTITION


def par_dim(n: int) -> ParDim:
    return ParDim(n)


# ---- creation -----------------------------------------------------------------------------
_HBM = ("hbm", "shared_hbm", "private_hbm")


def _par(shape, buf, api, ctx):
    """The partition axis of an on-chip shape: the axis marked nl.par_dim, else 0 (axes before it are
    deprecated block dimensions)."""
    if buf in _HBM or isinstance(shape, (int, np.integer)):
        return 0
    pars = [i for i, s in enumerate(shape) if isinstance(s, ParDim)]
    par = pars[0] if pars else 0
    if par > 0:
        # ERR err_leading_dimension_of_tensor_must_be_partition (SDK 2.26 nki.errors.rst) deprecates block
        # dimensions, but 2.26 supports them (its nki/test test_nki_memory_semantics.py, the errors page's fix for
        # err_failed_to_infer_tile_from_local_tensor, the direct-allocation guide's per-block tiles; the migration
        # guide has no PSUM migration yet); they were removed in NKI 0.2 (0.6 MIG).  Decision: a warning, also
        # under strict (hardware-proven: AWS's attention kernels); the 0.7 front end raises E010.
        ctx.warn_once(
            "blockdim",
            "block dimensions (axes before nl.par_dim) are deprecated in NKI 0.1 "
            "(warn_block_dimension_is_deprecated) and removed in NKI 0.2; each block is a separate tile. "
            "To migrate: fold the blocks into a free axis, nl.ndarray((P, B, F)), when they live at "
            "the same time, else declare a (P, F) tile inside the loop",
        )
    return par


def _direct_alloc(ctx, buffer, buf, api, name, filled=False):
    """The direct-allocation rules of a declaration (nki01/allocation.py): the run's state learns of a
    directly placed or an automatic tensor; returns the placement (None: automatic)."""
    direct = ctx.direct
    placement = getattr(buffer, "placement", None)
    if direct is None or direct.forced_auto:
        return None
    if placement is None:
        direct.automatic(buf, f"`{name or api}` ({'nl.' + api}, buffer=nl.{buf})", ctx.site)
        return None
    if filled:
        # ERR err_tensor_creation_on_scratchpad_with_init_value_not_supported (SDK 2.26 nki.errors.rst)
        raise NKISyntaxError(
            "E030",
            api,
            "buffer",
            "Creating SBUF/PSUM tensor with init value is not supported in allocated NKI kernels",
            "Declare it with nl.ndarray(..., buffer=ncc."
            f"{buf}.mod_alloc(...)) and write the value: t[...] = value (or nisa.memset)",
        )
    direct.activate(buf)
    return placement


def _placed(ctx, t, placement, shape, par):
    if placement is not None:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        ctx.direct.place(t, placement, shape, par, t.alloc.itemsize, ctx.site, ctx.loops)
        ctx.trace.placed_allocs.add(t.alloc.id)
    return t


def _rank_check(shape, buf, api):
    """The shape of a new tensor, checked.  KI (SDK 2.26 nki_known_issues.rst "Indexing"): an SBUF/PSUM tile has
    at least 2 dimensions, and users "may get" an "Insufficient rank" error on a 1-D one -- while 2024 CS149
    solutions that ran on hardware declare (128,) SBUF tiles.  So a 1-D on-chip shape (N,) is the lenient rule
    ki.tile_rank_1d and becomes the (N, 1) tile (partition-first: (P,) behaves as (P, 1)); a 0-D one has no
    partition axis (E010)."""
    if buf in _HBM:
        return shape
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if len(dims) >= 2:
        return shape
    what = (
        f"an SBUF/PSUM tile needs at least 2 dimensions (partition and free), got shape {shape!r} (Insufficient rank)"
    )
    fix = "Add a free axis: e.g. (128, 1) instead of (128,)"
    if len(dims) == 0:
        raise SimTypeError("E010", api, "shape", what, fix, got=shape, limit="rank >= 2")
    lenient("ki.tile_rank_1d", what + f"; the interpreter makes it ({dims[0]}, 1)", fix, op=api, arg="shape")
    return (dims[0], 1)


def ndarray(
    shape: int | tuple[int, ...],
    dtype: Any = float32,
    *,
    buffer: Buffer | str | None = None,
    name: str = "",
    **kwargs: Any,
) -> Tensor:
    ctx = _enter("ndarray", instruction=False)
    _reject_in_shape("nl.ndarray", shape)
    buf = _buffer_name(buffer, "ndarray")
    shape = _rank_check(shape, buf, "ndarray")
    if buf in _HBM:
        t = _allocate_hbm(ctx, shape, dtype, buf, api="ndarray", name=name)
        # RunContext.direct is this front end's DirectAllocation, or None
        if isinstance(ctx.direct, _alloc.DirectAllocation) and not ctx.direct.forced_auto:
            ctx.direct.hbm(buf, t, ctx.site)
        return t
    placement = _direct_alloc(ctx, buffer, buf, "ndarray", name)
    par = _par(shape, buf, "ndarray", ctx)
    # a directly placed tensor is not counted by the automatic allocator's live bytes: its physical tiles
    # are checked by nki01/allocation.py (addresses inside SBUF/PSUM; tensors sharing addresses share bytes)
    t = _allocate(
        shape,
        dtype,
        buf,
        api="ndarray",
        name=name,
        phys_tiles=getattr(buffer, "phys_tiles", None),
        par=par,
        track=placement is None,
    )
    return _placed(ctx, t, placement, shape, par)


def _filled(api, shape, dtype, buffer, name, value):
    ctx = _enter(api)
    _reject_in_shape(f"nl.{api}", shape)
    buf = _buffer_name(buffer, api)
    if buf in _HBM:
        raise NKISyntaxError(
            "E013",
            api,
            "buffer",
            "Creating HBM tensor with init value is not supported",
            "Use nl.ndarray for HBM tensors and write them with nl.store / dma_copy",
        )
    shape = _rank_check(shape, buf, api)
    placement = _direct_alloc(ctx, buffer, buf, api, name, filled=True)
    par = _par(shape, buf, api, ctx)
    t = _allocate(shape, dtype, buf, api=api, name=name, fill=value, par=par)
    _vector.fill(ctx, t, api=f"nl.{api}")
    if ctx.recorder is not None:  # a loop body being traced (core/program.py)
        ctx.recorder.filled(t, f"nl.{api}")
    if par and buf == "psum":
        ctx.memory.initialised_blocks(t.alloc)
    return _placed(ctx, t, placement, shape, par)


def zeros(
    shape: int | tuple[int, ...],
    dtype: Any = float32,
    *,
    buffer: Buffer | str | None = None,
    name: str = "",
    **kwargs: Any,
) -> Tensor:
    return _filled("zeros", shape, dtype, buffer, name, 0)


def ones(
    shape: int | tuple[int, ...],
    dtype: Any = float32,
    *,
    buffer: Buffer | str | None = None,
    name: str = "",
    **kwargs: Any,
) -> Tensor:
    return _filled("ones", shape, dtype, buffer, name, 1)


def full(
    shape: int | tuple[int, ...],
    fill_value: Any,
    dtype: Any = float32,
    *,
    buffer: Buffer | str | None = None,
    name: str = "",
    **kwargs: Any,
) -> Tensor:
    return _filled("full", shape, dtype, buffer, name, fill_value)


def _like(a, dtype, buffer):
    return a.shape, (a.dtype if dtype is None else dtype), (buffer if buffer is not None else a.buffer.value)


def empty_like(
    a: Tensor, dtype: Any = None, *, buffer: Buffer | str | None = None, name: str = "", **kw: Any
) -> Tensor:
    s, d, b = _like(a, dtype, buffer)
    return ndarray(s, d, buffer=b, name=name)


def ndarray_like(
    a: Tensor, dtype: Any = None, *, buffer: Buffer | str | None = None, name: str = "", **kw: Any
) -> Tensor:
    return empty_like(a, dtype, buffer=buffer, name=name)


def zeros_like(
    a: Tensor, dtype: Any = None, *, buffer: Buffer | str | None = None, name: str = "", **kw: Any
) -> Tensor:
    s, d, b = _like(a, dtype, buffer)
    return zeros(s, d, buffer=b, name=name)


def ones_like(a: Tensor, dtype: Any = None, *, buffer: Buffer | str | None = None, name: str = "", **kw: Any) -> Tensor:
    s, d, b = _like(a, dtype, buffer)
    return ones(s, d, buffer=b, name=name)


def full_like(
    a: Tensor, fill_value: Any, dtype: Any = None, *, buffer: Buffer | str | None = None, name: str = "", **kw: Any
) -> Tensor:
    s, d, b = _like(a, dtype, buffer)
    return full(s, fill_value, d, buffer=b, name=name)


def shared_identity_matrix(n: int, dtype: Any = uint8, **kw: Any) -> Tensor:
    """An (n, n) identity in HBM, like shared_constant (2.26 language doc: "create a new identity
    tensor ... in HBM"; SDK test_psum_modulo_alloc loads it with nl.load)."""
    _enter("shared_identity_matrix", instruction=False)
    t = _allocate((n, n), dtype, "hbm", api="shared_identity_matrix")
    t.write(np.eye(n, dtype=np.float32))
    return t


def shared_constant(constant: Any, dtype: Any = None, **kw: Any) -> Tensor:
    _enter("shared_constant", instruction=False)
    a = np.asarray(constant)
    d = dtype if dtype is not None else a.dtype
    t = _allocate(a.shape, d, "hbm", api="shared_constant")
    t.write(a)
    return t


# ---- SPMD -------------------------------------------------------------------------------------
num_programs, program_ndim = _spmd.num_programs, _spmd.program_ndim


def program_id(axis: int = 0) -> Index:
    """The SPMD instance index along ``axis``: an index like a loop index (docs/nki-0.1-rules.md section 11
    item 11; ERR err_shared_hbm_must_in_kernel_level uses it in an `if`, MASK lists it among mask operands)."""
    return _program_index(int(axis) if isinstance(axis, (int, np.integer)) else axis, _spmd.program_id(axis))


def nc(n: int) -> int:
    return int(n)


def spmd_dim(*dims: int) -> int:
    return int(np.prod([int(d) for d in dims]))


# ---- loops --------------------------------------------------------------------------------
# affine_range / sequential_range (and a `range` loop in the kernel function or a mode='trace' helper, the
# kernel's `range` is kernel_range below) yield symbolic indices (symbolic.py; aws-neuron-sdk@49ee15c5
# programming_model.rst "Representing data in NKI"); static_range yields ints (unrolled at trace time).
def affine_range(*args: Any, **kwargs: Any) -> Iterator[Index | int]:  # ints outside a kernel
    """Iterations may run in any order on hardware (shuffled with SimOptions.shuffle_affine_seed)."""
    traced = _traced_once(sys._getframe(1))  # the body is traced once: a loop program where it allows
    return _symbolic(_loop("affine", _bound_args("nl.affine_range", args), traced))


def sequential_range(*args: Any, **kwargs: Any) -> Iterator[Index | int]:
    """Iterations run in order (a program only where they are proven independent: then any order is the same)."""
    traced = _traced_once(sys._getframe(1))
    return _symbolic(_loop("sequential", _bound_args("nl.sequential_range", args), traced))


def static_range(*args: Any, **kwargs: Any) -> Iterator[int]:
    """Unrolled: the body's Python runs per iteration with an int index; a loop program where its source proves the
    iterations alike (sim/loopproof.py)."""
    return _loop("static", _bound_args("nl.static_range", args, static=True), *_prove(sys._getframe(1), (_Tensor,)))


def kernel_range(*args: Any) -> Iterator[Index | int] | range:
    """``range`` as the kernel function (and a ``mode='trace'`` helper) sees it: the iterator of a ``for``
    statement there is ``nl.sequential_range`` (NL sequential_range docstring, SDK 2.26: "range is replaced
    by sequential_range"); any other use (``list(range(n))``, a comprehension) is Python's range."""
    f = _user_frame()
    if f is not None and _symbolic_range_site(f):
        return _symbolic(_loop("sequential", _bound_args("range", args), _traced_once(f)))
    return range(*_bound_args("range", args))


# ---- indices ------------------------------------------------------------------------------
def arange(*args: int) -> IndexExpr:
    if len(args) == 0 or len(args) > 2:
        raise NKISyntaxError("E014", "arange", None, "nl.arange takes (stop) or (start, stop)", "No step")
    _reject_in_shape("nl.arange", args)
    return IndexExpr(np.arange(*[int(a) for a in args]))


mgrid = _MGridMaker()


def ds(start: int, size: int) -> slice:
    """Dynamic slice ``start:start+size``."""
    return slice(int(start), int(start) + int(size))


# ---- data movement ------------------------------------------------------------------------
_load = returns_fresh(_dma.load, api="nl.load")
_store = with_dst(_dma.store, api="nl.store")


def load(*args: Any, **kw: Any) -> Any:
    src = args[0] if args else kw.get("src")
    if src.__class__ is _indirect.IndirectTensor:
        _indirect.check_load_store("nl.load", src)
    return _load(*args, **kw)


def store(*args: Any, **kw: Any) -> Any:
    dst = args[0] if args else kw.get("dst")
    if dst.__class__ is _indirect.IndirectTensor:
        _indirect.check_load_store("nl.store", dst)
    return _store(*args, **kw)


load.__doc__, store.__doc__ = _load.__doc__, _store.__doc__
# function attributes (adapt.returns_fresh / with_dst set core_op): mypy does not model them
load.core_op, store.core_op = _load.core_op, _store.core_op  # type: ignore[attr-defined]
load_transpose2d = returns_fresh(_dma.load_transpose2d)
copy = returns_fresh(_vector.tensor_copy, name="copy", api="nl.copy", default_engine=_ACT)
broadcast_to = returns_fresh(_vector.broadcast_to)


def expand_dims(data: Tile, axis: int | tuple[int, ...]) -> Tile:
    if not isinstance(data, Tile) or data.arr is None:
        raise SimTypeError("E010", "expand_dims", "data", "expects a tile")
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    n = data.ndim + len(axes)
    norm = sorted(int(a) + n if int(a) < 0 else int(a) for a in axes)
    # NL expand_dims (SDK 2.26 language docstring): new axes only after the tile's last index
    if norm != list(range(data.ndim, n)):
        raise SimValueError(
            "E023",
            "expand_dims",
            "axis",
            f"new axes can only be added after the last index of a {data.ndim}-D tile, got axis={axis!r}",
            f"Use axis={data.ndim} (or nl.reshape / an index expression for other positions)",
            got=axis,
            limit=f"{data.ndim}..{n - 1}",
        )
    return data.reshape(data.shape + (1,) * len(axes))


def device_print(prefix: str, x: Any, **kw: Any) -> None:
    """Prints in the interpreter (a no-op on hardware)."""
    _enter("device_print", instruction=False)
    v = x.read() if isinstance(x, Tile) else x
    print(prefix, np.asarray(v).astype(np.float32) if isinstance(x, Tile) else v, file=sys.stdout)


# ---- elementwise ops --------------------------------------------------------------------------
def _unary(name):
    f = returns_fresh(_vector.unary, name=name, api=f"nl.{name}", pre=(name,))
    f._nki_op = name
    return f


def _index_tile(x):
    """An index expression as an operand: PM "Representing data in NKI" -- an index is a tensor; the
    compiler materialises it as an int32 tile (what nisa.iota makes)."""
    if x.__class__ is not IndexExpr:
        return x
    v = x.v if x.ndim >= 2 else x.v.reshape(-1, 1)
    return _vector.iota(_enter("iota"), None, v, _dt.int32, api="nisa.iota")


def _binary(name):
    core = returns_fresh(_vector.binary, name=name, api=f"nl.{name}", pre=(name,))

    def f(x, y, *args, **kw):
        if x.__class__ is IndexExpr or y.__class__ is IndexExpr:
            x, y = _index_tile(x), _index_tile(y)
        return core(x, y, *args, **kw)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = core.__doc__
    f.core_op = core.core_op
    f._nki_op = name
    return f


# one registration line per elementwise nl.* op (grep '^name = '): the fp32 function and default
# engine of each are in core/ops.py UNARY / BINARY / BITWISE
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
reciprocal = _unary("reciprocal")
square = _unary("square")
negative = _unary("negative")
abs = _unary("abs")
sign = _unary("sign")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
tanh = _unary("tanh")
arctan = _unary("arctan")
erf = _unary("erf")
erf_dx = _unary("erf_dx")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
gelu = _unary("gelu")
gelu_dx = _unary("gelu_dx")
gelu_apprx_tanh = _unary("gelu_apprx_tanh")
gelu_apprx_sigmoid = _unary("gelu_apprx_sigmoid")
silu = _unary("silu")
silu_dx = _unary("silu_dx")
softplus = _unary("softplus")
mish = _unary("mish")
ceil = _unary("ceil")
floor = _unary("floor")
trunc = _unary("trunc")
logical_not = _unary("logical_not")
invert = _unary("invert")
add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
power = _binary("power")
maximum = _binary("maximum")
minimum = _binary("minimum")
fmod = _binary("fmod")
mod = _binary("mod")
floor_divide = _binary("floor_divide")
equal = _binary("equal")
not_equal = _binary("not_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
less = _binary("less")
less_equal = _binary("less_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
copy._nki_op = "copy"  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
where = returns_fresh(_vector.where, api="nl.where")


# ---- reductions ---------------------------------------------------------------------------
def _reduction(name, nki_op=None):
    f = returns_fresh(_reduce.reduce, name=name, api=f"nl.{name}", pre=(name,))
    if nki_op:
        f._nki_op = nki_op
    return f


sum = _reduction("sum", "add")
max = _reduction("max", "max")
min = _reduction("min", "min")
mean = _reduction("mean")
prod = _reduction("prod", "multiply")
all = _reduction("all")
var = _reduction("var")

# ---- matmul / transpose / composite --------------------------------------------------------
matmul = returns_fresh(_tensore.matmul, api="nl.matmul")
transpose = returns_fresh(_tensore.transpose, api="nl.transpose")
softmax = returns_fresh(_reduce.softmax)
rms_norm = returns_fresh(_reduce.rms_norm)


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype (``nl.finfo``, 2.26 language docs; NumPy/ml_dtypes ``finfo``)."""
    d = _dt.canonical(dtype, op="finfo")
    if not _dt.is_float(d):
        raise SimValueError(
            "E018",
            "finfo",
            "dtype",
            f"finfo needs a float dtype, got {_dt.name_of(d)}",
            "Use np.iinfo for integer types",
        )
    return np.finfo(np.float32) if d is _dt.tfloat32 else _ml_dtypes.finfo(d)


# ---- gathers, random numbers, loop reductions ---------------------------------------------------
gather_flattened = returns_fresh(_indirect.gather_flattened)
rand = returns_fresh(_rng.rand)
random_seed = returns_fresh(_rng.random_seed)
dropout = returns_fresh(_rng.dropout, api="nl.dropout")

_CACHE_OPS = ("CACHE", "PRECALL", "EXTENDED_ARG", "NOP")


def _assignment_target(frame):
    """The tensor the caller's statement assigns the current call's result to, or None.

    ``b = nl.loop_reduce(...)`` (a plain name) and ``b[<constant>] = nl.loop_reduce(...)`` are
    recognised from the bytecode that follows the call; other forms raise."""
    instrs = [i for i in _dis.get_instructions(frame.f_code) if i.opname not in _CACHE_OPS]
    after = [i for i in instrs if i.offset > frame.f_lasti]
    if not after:
        return None, False
    first = after[0]
    scopes = (frame.f_locals, frame.f_globals)
    if first.opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"):
        for sc in scopes:
            if first.argval in sc:
                return sc[first.argval], True
        return None, True
    if (
        first.opname in ("LOAD_FAST", "LOAD_NAME", "LOAD_DEREF", "LOAD_GLOBAL")
        and len(after) >= 3
        and after[1].opname == "LOAD_CONST"
        and after[2].opname == "STORE_SUBSCR"
    ):
        for sc in scopes:
            if first.argval in sc:
                return sc[first.argval][after[1].argval], True
    return _subscript_target(frame)


def _subscript_target(frame):
    """``x[<any index expression>] = nl.loop_reduce(...)``: the view the statement assigns to, found from the
    statement's source (the call's position in the frame's code) and evaluated in the caller's scope (nki-samples
    attention.py flash_attn_bwd: ``dq_local_reduced[...] = nl.loop_reduce(``; docs/nki-0.1-rules.md §7)."""
    code = frame.f_code
    pos = (
        next((p for i, p in enumerate(code.co_positions()) if 2 * i == frame.f_lasti), None)
        if hasattr(code, "co_positions")
        else None
    )
    if pos is None or pos[0] is None:
        return None, False
    fn, _ = _lookup(code, frame.f_globals)
    if fn is None:
        return None, False
    for node in _ast.walk(fn):
        if (
            isinstance(node, _ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], _ast.Subscript)
            and isinstance(node.value, _ast.Call)
            and node.value.lineno == pos[0]
            and node.value.col_offset == pos[2]
        ):
            target = node.targets[0]
            expr = _ast.Expression(_ast.Subscript(target.value, target.slice, _ast.Load()))
            _ast.copy_location(expr.body, target)
            try:
                value = eval(compile(expr, code.co_filename, "eval"), frame.f_globals, frame.f_locals)
            except Exception:  # noqa: BLE001 -- re-raised as E021 by the caller
                return None, False
            return value, True
    return None, False


def loop_reduce(x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    """``b = nl.loop_reduce(a, op, loop_indices)`` is ``b = nisa.tensor_tensor(data1=b, data2=a, op)``
    (2.26 language docs); the interpreter finds the destination (the assigned name's current tile) in
    the calling statement (README divergences); when the name is not bound yet the result is ``a``."""
    ctx = _enter("loop_reduce")
    acc, ok = _assignment_target(_user_frame())
    if not ok:
        raise NKISyntaxError(
            "E021",
            "loop_reduce",
            None,
            "nl.loop_reduce must be assigned to its destination: "
            "`b = nl.loop_reduce(a, op, loop_indices)` or `b[...] = nl.loop_reduce(...)`",
            "Assign the result directly to the accumulating tile",
        )
    return _select.loop_reduce(
        ctx, _PENDING, x, op, acc if isinstance(acc, Tile) else None, dtype=dtype, mask=_mask_value(mask, "loop_reduce")
    )


def __getattr__(name: str) -> NoReturn:
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.language.{name}")


# ---- direct-allocation rules of single calls (nki01/allocation.py) --------------------------------------
def _guarded(fn, check):
    def call(*args, **kw):
        ctx = _maybe_current()
        if ctx is not None:
            d = ctx.direct
            if d is not None and d.active:
                check(args, kw)
        return fn(*args, **kw)

    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    for attr in ("core_op", "_nki_op"):
        if hasattr(fn, attr):
            setattr(call, attr, getattr(fn, attr))
    return call


def _activation_op(name):
    def check(args, kw):
        # ERR err_bias_tensor_must_be_specified_in_allocation: "nl.exp maps to the instruction as
        # nisa.activation, must use nisa.activation and specify bias tensor in allocation kernels"
        if kw.get("engine") is None or getattr(kw.get("engine"), "name", None) == "scalar":
            _alloc.check_bias(f"nl.{name}", None)

    return check


for _n, (_f, _eng) in _ops_tables.UNARY.items():
    if _eng is _ACT and _n in globals() and _n not in ("copy", "identity"):
        globals()[_n] = _guarded(globals()[_n], _activation_op(_n))


def _matmul_transpose(args, kw):
    if not kw.get("transpose_x", args[2] if len(args) > 2 else False):
        _alloc.check_tensor_engine_transpose(
            "nl.matmul", "nl.matmul without transpose_x=True (a TensorE transpose of x)"
        )


matmul = _guarded(matmul, _matmul_transpose)


def _invert(fn):
    def call(x, *args, **kw):
        if isinstance(x, Tile) and x.dtype is _dt.bool_:
            # KI (SDK 2.26 nki_known_issues.rst "Execution"): nl.invert "produces incorrect result with bool
            # input type, use int8 type instead" -- it runs here; a warning, E024 under strict
            _unproven(
                "ki.invert_bool",
                "nl.invert on a bool tile gives wrong results on hardware (known issue); use "
                "an int8 tile (or nl.logical_not)",
            )
        return fn(x, *args, **kw)

    call.__name__ = call.__qualname__ = "invert"
    call._nki_op = fn._nki_op
    call.core_op = fn.core_op
    return call


invert = _invert(invert)
transpose = _guarded(
    transpose, lambda a, k: _alloc.check_tensor_engine_transpose("nl.transpose", "nl.transpose (TensorE)")
)
softmax = _guarded(softmax, lambda a, k: _alloc.check_implicit_api("nl.softmax"))
rms_norm = _guarded(rms_norm, lambda a, k: _alloc.check_implicit_api("nl.rms_norm"))

# the tile operators map to nl.* (tile.NL)
_tile_mod.NL.update({n: v for n, v in dict(globals()).items() if callable(v) and not n.startswith("_")})
_tile_mod.NL["expand_dims"] = expand_dims
