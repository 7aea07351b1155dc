"""``neuronxcc.nki.language`` (nl) on NumPy: creation, data movement, elementwise and
reduction ops, loops, indexing helpers (spec §3-§7, §10, §11)."""
from __future__ import annotations

import builtins
import sys

import numpy as np

from . import dtypes as _dt
from . import isa as _isa
from . import tensor as _tensor_mod
from . import limits as _limits
from . import ops as _ops
from .context import current as _current, maybe_current as _maybe_current, unproven as _unproven
from .errors import (NKISyntaxError, SimIndexError, SimTypeError, SimValueError, not_implemented,
                     partition_error)
from .indexing import IndexExpr, MaskExpr, _MGridMaker, mask_array as _mask_array
from .tensor import ParDim, Tensor, allocate as _allocate, fresh as _fresh
from .trace import ACT, DVE, POOL

# ---- dtypes -------------------------------------------------------------------------------
float32, float16, bfloat16, tfloat32 = _dt.float32, _dt.float16, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e5m2
int8, uint8, int16, uint16, int32, uint32, bool_ = (_dt.int8, _dt.uint8, _dt.int16, _dt.uint16, _dt.int32,
                                                     _dt.uint32, _dt.bool_)


class _Limits:
    def __init__(self, mn, mx):
        self.min, self.max = mn, mx


fp32 = _Limits(float(np.float32(np.finfo(np.float32).min)), float(np.finfo(np.float32).max))
bfp16 = _Limits(float("-inf"), float("inf"))   # 0xff80 decodes as bf16 -inf (spec §3)


def static_cast(x, dtype):
    """Cast a NumPy array (also outside kernels) or a tile to ``dtype``."""
    if isinstance(x, Tensor):
        return copy(x, dtype=dtype)
    d = _dt.canonical(dtype, op="static_cast")
    out = np.empty(np.shape(x), dtype=_dt.storage_dtype(d, "hw"))
    _dt.cast_into(out, np.asarray(x, dtype=np.float32) if np.asarray(x).dtype.kind == "f" else np.asarray(x), d)
    return out


# ---- buffers ------------------------------------------------------------------------------
class Buffer:
    """A memory buffer (nl.sbuf, nl.psum, ...).  ``phys_tiles``: the number of physical tiles a
    ``mod_alloc`` gives a block-dimension tensor (None: automatic allocation)."""

    def __init__(self, name, phys_tiles=None):
        self.name = name
        self.phys_tiles = phys_tiles

    def __repr__(self):
        return f"nl.{self.name}" if self.phys_tiles is None else f"nl.{self.name}.mod_alloc({self.phys_tiles} tiles)"

    def mod_alloc(self, *args, num_bank_tiles=(), num_par_tiles=(), num_free_tiles=(), **kwargs):
        """Modulo allocation: addresses are not modelled, but capacity counts the physical tiles,
        the product of ``num_*_tiles`` (SDK 2.26 nki.compiler psum.mod_alloc / sbuf.mod_alloc; an
        empty shape is one tile, as the SDK's test_psum_modulo_alloc example defines it)."""
        n = 1
        for t in tuple(num_bank_tiles) + tuple(num_par_tiles) + tuple(num_free_tiles):
            n *= int(t)
        return Buffer(self.name, n)

    def auto_alloc(self, *args, **kwargs):
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
    raise SimTypeError("E007", api, "buffer", f"unknown buffer {buffer!r}",
                        "Use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm")


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


def par_dim(n):
    return ParDim(n)


# ---- creation -----------------------------------------------------------------------------
def _hbm_alloc(shape, dtype, buf, api, name):
    ctx = _current(api)
    if buf == "shared_hbm" and ctx.loops:
        raise NKISyntaxError("E013", api, "buffer", "shared_hbm buffer can only be created top level kernel scope",
                              "Create kernel outputs before any loop")
    if ctx.program_id and any(ctx.program_id):
        # SPMD instances after the first see the same HBM outputs (allocated by instance 0)
        if ctx.hbm_cursor < len(ctx.hbm_registry):
            t = ctx.hbm_registry[ctx.hbm_cursor]
            ctx.hbm_cursor += 1
            return t
    t = _allocate(shape, dtype, buf, api=api, name=name)
    ctx.hbm_registry.append(t)
    ctx.hbm_cursor += 1
    return t


def ndarray(shape, dtype=float32, *, buffer=None, name="", **kwargs):
    buf = _buffer_name(buffer, "ndarray")
    if buf in ("hbm", "shared_hbm", "private_hbm"):
        return _hbm_alloc(shape, dtype, buf, "ndarray", name)
    return _allocate(shape, dtype, buf, api="ndarray", name=name,
                     phys_tiles=getattr(buffer, "phys_tiles", None))


def _filled(api, shape, dtype, buffer, name, value):
    buf = _buffer_name(buffer, api)
    if buf in ("hbm", "shared_hbm", "private_hbm"):
        raise NKISyntaxError("E013", api, "buffer", "Creating HBM tensor with init value is not supported",
                             "Use nl.ndarray for HBM tensors and write them with nl.store / dma_copy")
    t = _allocate(shape, dtype, buf, api=api, name=name, fill=value)
    ctx = _current(api)
    _ops.record_compute(ctx, "memset", f"nl.{api}", DVE if buf == "sbuf" else DVE, [], t, func="memset")
    return t


def zeros(shape, dtype=float32, *, buffer=None, name="", **kwargs):
    return _filled("zeros", shape, dtype, buffer, name, 0)


def ones(shape, dtype=float32, *, buffer=None, name="", **kwargs):
    return _filled("ones", shape, dtype, buffer, name, 1)


def full(shape, fill_value, dtype=float32, *, buffer=None, name="", **kwargs):
    return _filled("full", shape, dtype, buffer, name, fill_value)


def _like(a, dtype, buffer):
    return a.shape, (a.dtype if dtype is None else dtype), (buffer if buffer is not None else a.buffer)


def empty_like(a, dtype=None, *, buffer=None, name="", **kw):
    s, d, b = _like(a, dtype, buffer)
    return ndarray(s, d, buffer=b, name=name)


def ndarray_like(a, dtype=None, *, buffer=None, name="", **kw):
    return empty_like(a, dtype, buffer=buffer, name=name)


def zeros_like(a, dtype=None, *, buffer=None, name="", **kw):
    s, d, b = _like(a, dtype, buffer)
    return zeros(s, d, buffer=b, name=name)


def ones_like(a, dtype=None, *, buffer=None, name="", **kw):
    s, d, b = _like(a, dtype, buffer)
    return ones(s, d, buffer=b, name=name)


def full_like(a, fill_value, dtype=None, *, buffer=None, name="", **kw):
    s, d, b = _like(a, dtype, buffer)
    return full(s, fill_value, d, buffer=b, name=name)


def shared_identity_matrix(n, dtype=uint8, **kw):
    """An (n, n) identity in HBM, like shared_constant (2.26 language doc: "create a new identity
    tensor ... in HBM"; SDK test_psum_modulo_alloc loads it with nl.load; issue 8 item 10)."""
    t = _allocate((n, n), dtype, "hbm", api="shared_identity_matrix")
    t.write(np.eye(n, dtype=np.float32))
    return t


def shared_constant(constant, dtype=None, **kw):
    a = np.asarray(constant)
    d = dtype if dtype is not None else a.dtype
    t = _allocate(a.shape, d, "hbm", api="shared_constant")
    t.write(a)
    return t


# ---- SPMD -------------------------------------------------------------------------------------
def program_id(axis):
    ctx = _current("program_id")
    if not isinstance(axis, (int, np.integer)) or axis < 0 or axis >= len(ctx.grid):
        raise SimIndexError("E017", "program_id", "axis", "axis in `program_id` is out-of-bound(s) of the spmd "
                            "launch grid", f"The grid is {ctx.grid or '()'}; launch with kernel[g0, g1](...)",
                            got=axis, limit=len(ctx.grid))
    return ctx.program_id[axis]


def num_programs(axes=None):
    ctx = _current("num_programs")
    if axes is None:
        return int(np.prod(ctx.grid)) if ctx.grid else 1
    if isinstance(axes, (tuple, list)):
        return tuple(ctx.grid[a] for a in axes)
    if axes >= len(ctx.grid):
        raise SimIndexError("E017", "num_programs", "axes", "axis out of the spmd launch grid",
                            got=axes, limit=len(ctx.grid))
    return ctx.grid[axes]


def program_ndim():
    return len(_current("program_ndim").grid)


def nc(n):
    return int(n)


def spmd_dim(*dims):
    return int(np.prod([int(d) for d in dims]))


# ---- loops --------------------------------------------------------------------------------
def _loop(kind, args):
    r = builtins.range(*args)
    ctx = _maybe_current()
    order = list(r)
    if ctx is not None and kind == "affine" and ctx.rng is not None and not ctx.skip_middle_end:
        ctx.rng.shuffle(order)
    if ctx is None:
        yield from order
        return
    if kind == "affine" and not order:
        # an affine_range that runs zero times is hardware-unproven (spec Corrections 12)
        _unproven("zero_trip", f"nl.affine_range{tuple(args)} runs zero times (hardware-unproven); guard the "
                  "loop with an `if` on the trip count")
    outer = ctx.loops
    for i in order:
        ctx.loops = outer + ((kind, i),)
        try:
            yield i
        finally:
            ctx.loops = outer


def affine_range(*args, **kwargs):
    """Iterations may run in any order on hardware (shuffled with SimOptions.shuffle_affine_seed)."""
    return _loop("affine", args)


def sequential_range(*args, **kwargs):
    return _loop("sequential", args)


def static_range(*args, **kwargs):
    return _loop("static", args)


# ---- indices ------------------------------------------------------------------------------
def arange(*args):
    if len(args) == 0 or len(args) > 2:
        raise NKISyntaxError("E014", "arange", None, "nl.arange takes (stop) or (start, stop)", "No step")
    return IndexExpr(np.arange(*[int(a) for a in args]))


mgrid = _MGridMaker()


def ds(start, size):
    """Dynamic slice ``start:start+size``."""
    return slice(int(start), int(start) + int(size))


# ---- data movement ------------------------------------------------------------------------
def load(src, *, mask=None, dtype=None, **kwargs):
    """HBM -> new SBUF tile (optionally cast)."""
    ctx = _current("load")
    _ops.hbm(src, "load", "src")
    d = src.dtype if dtype is None else _dt.canonical(dtype, op="load")
    # on-chip tiles are at least 2-D: a 1-element or 1-D HBM tensor loads as (1, 1) / (N, 1)
    # (known-issues doc "Tile on SBUF/PSUM must have at least 2 dimensions"; issue 8 item 16)
    shape = tuple(src.shape) + (1,) * (2 - len(src.shape)) if len(src.shape) < 2 else src.shape
    if shape[0] > _limits.PMAX:
        raise partition_error("load", "src", shape[0], "Load at most 128 rows per nl.load (tile the leading axis)")
    dst = _allocate(shape, d, "sbuf", api="load")
    m = _mask_array(mask, shape, "load")
    ev = _ops.dma_transfer(dst, src, api="nl.load", mask=m, how="same" if shape == src.shape else "reshape")
    if ev is not None:   # `tile[...] = nl.load(...)` becomes one DMA into tile (under the load's mask)
        dst._event, dst._exact, dst._exact_ver = ev, dst.arr, dst.alloc.version
        dst._mask = m
    return dst


def store(dst, value, *, mask=None, **kwargs):
    """SBUF/PSUM tile (or scalar) -> HBM, cast to dst's dtype, partition-aligned broadcast."""
    ctx = _current("store")
    _ops.hbm(dst, "store", "dst")
    m = _mask_array(mask, dst.shape, "store")
    if isinstance(value, Tensor):
        _ops.tile(value, "store", "value", engine_access=False)
        how = _ops._fit("store", value.shape, dst.shape, dst.name)
        if value.buffer == "psum":       # PSUM values are first copied to SBUF [lang]
            value = copy(value)
        _ops.dma_transfer(dst, value, api="nl.store", mask=m, how=how)
    else:
        _ops.assign(dst, value, api="nl.store", mask=mask)


def load_transpose2d(src, *, mask=None, dtype=None, **kwargs):
    """2-D HBM [N, M] -> SBUF [M, N] (M <= 128) via a transposing DMA."""
    ctx = _current("load_transpose2d")
    _ops.hbm(src, "load_transpose2d", "src")
    if len(src.shape) != 2:
        raise SimValueError("E020", "load_transpose2d", "src", f"expects a 2-D access, got shape {src.shape}")
    n, m_ = src.shape
    if m_ > _limits.PMAX:
        raise partition_error("load_transpose2d", "src", m_,
                              "The transposed tile's partition axis is src's last axis: keep it <= 128")
    d = src.dtype if dtype is None else _dt.canonical(dtype, op="load_transpose2d")
    dst = _allocate((m_, n), d, "sbuf", api="load_transpose2d")
    m = _mask_array(mask, (m_, n), "load_transpose2d")     # mask= is on the result tile
    if m is not False:
        dst.write(src.read(None if m is None or m is True else m.T).T, m)
    ev = _ops._record_dma(ctx, "nl.load_transpose2d", dst, src, dst.size, op="dma_transpose")
    if ev is not None:    # lands directly when assigned, under its mask (like nl.load)
        dst._event, dst._exact, dst._exact_ver, dst._mask = ev, dst.arr, dst.alloc.version, m
    return dst


def copy(src, *, mask=None, dtype=None, **kwargs):
    """SBUF/PSUM tile -> new SBUF tile (tensor_copy); never shares storage with ``src``."""
    return _isa.tensor_copy(src, mask=mask, dtype=dtype, _api="nl.copy")


def broadcast_to(src, shape, **kwargs):
    ctx = _current("broadcast_to")
    _ops.tile(src, "broadcast_to", "src")
    shape = tuple(shape)
    v = src.read_f32()
    try:
        out = np.broadcast_to(_ops.pa_pad(v, len(shape)), shape)
    except ValueError:
        raise SimValueError("E011", "broadcast_to", "shape", f"cannot broadcast {src.shape} to {shape}") from None
    t = _fresh(np.array(out), src.dtype, api="broadcast_to")
    _ops.record_compute(ctx, "tensor_copy", "nl.broadcast_to", DVE if src.shape[0] == shape[0] else POOL,
                        [src], t, func="broadcast")
    return t


def expand_dims(data, axis):
    if not isinstance(data, Tensor) or data.arr is None:
        raise SimTypeError("E010", "expand_dims", "data", "expects a tile")
    if axis < 1 or axis > data.ndim:
        raise SimValueError("E023", "expand_dims", "axis", f"only free (trailing) axes can be added, got {axis}",
                            got=axis, limit=f"1..{data.ndim}")
    return data.reshape(data.shape[:axis] + (1,) + data.shape[axis:])


def device_print(prefix, x, **kw):
    """Prints in the interpreter (a no-op on hardware)."""
    v = x.read() if isinstance(x, Tensor) else x
    print(prefix, np.asarray(v).astype(np.float32) if isinstance(x, Tensor) else v, file=sys.stdout)


# ---- elementwise ops --------------------------------------------------------------------------
def _unary(name):
    fn, engine = _ops.UNARY[name]

    def op(x, *, dtype=None, mask=None, **kwargs):
        api = name
        ctx = _current(api)
        _ops.tile(x, api, "x")
        m = _mask_array(mask, x.shape, api)
        if name == "invert":
            r = np.invert(x.read(m).astype(np.int64)) if _dt.is_int(x.dtype) else (x.read_f32(m) == 0)
        else:
            r = np.asarray(fn(x.read_f32(m)), dtype=np.float32)
        d = _ops.out_dtype(dtype, _dt.bool_ if name == "logical_not" else x.dtype, api)
        out = _fresh(r, d, api=api, mask=m)
        _ops.record_compute(ctx, "activation" if engine == ACT else "tensor_scalar", f"nl.{name}",
                            engine, [x], out, func=name)
        return out
    op.__name__ = name
    op._nki_op = name
    return op


def _binary(name):
    is_bit = name in _ops.BITWISE
    fn = _ops.BITWISE[name] if is_bit else _ops.BINARY[name]
    is_cmp = name in _ops.COMPARE

    def op(x, y, *, dtype=None, mask=None, **kwargs):
        api = name
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            return fn(x, y)
        ctx = _current(api)
        for arg, v in (("x", x), ("y", y)):
            if isinstance(v, Tensor):
                _ops.tile(v, api, arg)
            elif not isinstance(v, (int, float, np.integer, np.floating, bool, np.bool_)):
                raise SimTypeError("E010", api, arg, f"expected a tile or a scalar, got {type(v).__name__}")
        shapes = [v.shape for v in (x, y) if isinstance(v, Tensor)]
        shape = _ops.pa_shape(api, *shapes)
        nd = len(shape)
        m = _mask_array(mask, shape, api)
        if is_bit:
            a = x.read(m).astype(np.int64) if isinstance(x, Tensor) else int(x)
            b = y.read(m).astype(np.int64) if isinstance(y, Tensor) else int(y)
        else:
            a, b = _ops.value_of(x, m), _ops.value_of(y, m)
        if isinstance(a, np.ndarray):
            a = _ops.pa_pad(a, nd)
        if isinstance(b, np.ndarray):
            b = _ops.pa_pad(b, nd)
        r = np.asarray(fn(a, b))
        if r.shape != shape:
            r = np.broadcast_to(r, shape)
        if not is_bit:
            r = r.astype(np.float32, copy=False)
        default = _dt.bool_ if is_cmp else _dt.promote(_ops.dtype_of(x), _ops.dtype_of(y))
        d = _ops.out_dtype(dtype, default, api)
        out = _fresh(np.ascontiguousarray(r), d, api=api, mask=m)
        both = isinstance(x, Tensor) and isinstance(y, Tensor) and x.shape == y.shape
        _ops.record_compute(ctx, "tensor_tensor" if both else "tensor_scalar", f"nl.{name}", DVE, [x, y], out,
                            func=name)
        return out
    op.__name__ = name
    op._nki_op = name
    return op


# one registration line per elementwise nl.* op (grep '^name = '): the fp32 function and default
# engine of each are in ops.UNARY / ops.BINARY / ops.BITWISE
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
copy._nki_op = "copy"


def where(condition, x, y, *, dtype=None, mask=None, **kwargs):
    ctx = _current("where")
    _ops.tile(condition, "where", "condition")
    shapes = [v.shape for v in (condition, x, y) if isinstance(v, Tensor)]
    shape = _ops.pa_shape("where", *shapes)
    c = _ops.pa_pad(condition.read_f32(), len(shape)) != 0
    a = _ops.value_of(x)
    b = _ops.value_of(y)
    a = _ops.pa_pad(a, len(shape)) if isinstance(a, np.ndarray) else a
    b = _ops.pa_pad(b, len(shape)) if isinstance(b, np.ndarray) else b
    r = np.broadcast_to(np.where(c, a, b), shape).astype(np.float32)
    d = _ops.out_dtype(dtype, _dt.promote(_ops.dtype_of(x), _ops.dtype_of(y)), "where")
    out = _fresh(np.ascontiguousarray(r), d, api="where", mask=_mask_array(mask, shape, "where"))
    _ops.record_compute(ctx, "tensor_tensor", "nl.where", DVE, [condition, x, y], out, func="select")
    return out


# ---- reductions ---------------------------------------------------------------------------
def _axes(x, axis, api):
    """Reduction axes; negative axes normalise as in NumPy (2.26 nl.sum is "similar to
    numpy.sum"; spec Corrections 3); the partition axis stays illegal."""
    ax = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ax = tuple(int(a) + x.ndim if -x.ndim <= a < 0 else int(a) for a in ax)
    for a in ax:
        if a < 0:
            raise SimValueError("E023", api, "axis", f"axis {a - x.ndim} out of range for a tile of rank {x.ndim}",
                                f"Name free axes (1..{x.ndim - 1} or -1..{1 - x.ndim})")
        if a == 0:
            raise SimValueError("E023", api, "axis", "cannot reduce the partition axis (axis 0)",
                                "Reduce free axes only; transpose first to reduce across partitions")
        if a >= x.ndim:
            raise SimValueError("E023", api, "axis", f"axis {a} out of range for a tile of rank {x.ndim}",
                                got=a, limit=x.ndim - 1)
    return ax


def _reduction(name, npfn, *, has_keepdims=True, default_dtype=None):
    def op(x, axis, *, dtype=None, mask=None, keepdims=False, **kwargs):
        api = name
        ctx = _current(api)
        _ops.tile(x, api, "x")
        ax = _axes(x, axis, api)
        # a reduction's mask= selects its inputs; it is not applied to the output shape
        # (spec Corrections 3; issue 8 item 7)
        m = _mask_array(mask, x.shape, api)
        v = x.read_f32(m)
        om = None
        if m is None or m is True:
            r = np.asarray(npfn(v, axis=ax, keepdims=keepdims), dtype=np.float32)
        else:
            r = _ops.masked_reduce(name, v, ax, keepdims, m)
            om = _ops.reduce_out_mask(m, ax, keepdims)      # outputs with no selected input: not written
        d = _ops.out_dtype(dtype, default_dtype or (x.dtype if name != "mean" or _dt.is_float(x.dtype)
                                                    else _dt.float32), api)
        out = _fresh(r, d, api=api, mask=om)
        _ops.record_compute(ctx, "tensor_reduce", f"nl.{name}", DVE, [x], out, func=name)
        return out
    op.__name__ = name
    return op


sum = _reduction("sum", np.sum)
sum._nki_op = "add"
max = _reduction("max", np.max)
max._nki_op = "max"
min = _reduction("min", np.min)
min._nki_op = "min"
mean = _reduction("mean", np.mean)
prod = _reduction("prod", np.prod)
prod._nki_op = "multiply"
all = _reduction("all", lambda a, axis, keepdims: np.all(a != 0, axis=axis, keepdims=keepdims),
                 default_dtype=_dt.bool_)
var = _reduction("var", np.var)


# ---- matmul / transpose / composite --------------------------------------------------------
def matmul(x, y, *, transpose_x=False, mask=None, **kwargs):
    """``x @ y`` (``x.T @ y`` with transpose_x) into a new PSUM fp32 tile."""
    isa = _isa
    ctx = _current("matmul")
    if isinstance(x, Tensor) and x.buffer == "psum":
        x = copy(x)
    if isinstance(y, Tensor) and y.buffer == "psum":
        y = copy(y)
    if not transpose_x:
        _ops.tile(x, "matmul", "x")
        xt = isa.nc_transpose(x, engine=isa.engine.tensor, _api="nl.matmul")
        x = isa.tensor_copy(xt, _api="nl.matmul")
    return isa.nc_matmul(x, y, mask=mask, _api="nl.matmul")


def transpose(x, *, dtype=None, mask=None, **kwargs):
    """2-D tile transpose on TensorE (both dims <= 128); result in PSUM (spec §8)."""
    isa = _isa
    _ops.tile(x, "transpose", "x")
    if x.ndim != 2:
        raise SimValueError("E020", "transpose", "x",
                            f"parameter 'x{list(x.shape)}' of 'transpose' exceed max supported number of "
                            f"dimensions of 2.", "Reshape to 2-D first")
    return isa.nc_transpose(x, dtype=dtype, mask=mask, engine=isa.engine.tensor, _api="nl.transpose")


def softmax(x, axis, *, dtype=None, mask=None, **kwargs):
    """exp(x - max) / sum(exp(x - max)); ``mask=`` restricts every step (masked-out outputs
    are not written)."""
    m = max(x, axis=axis, keepdims=True, mask=mask)
    e = exp(subtract(x, m, mask=mask), mask=mask)
    return divide(e, sum(e, axis=axis, keepdims=True, mask=mask), dtype=dtype, mask=mask)


def rms_norm(x, w, axis, n, epsilon=1e-6, *, dtype=None, mask=None, **kwargs):
    """x * rsqrt(sum(x^2, axis) / n + epsilon) * w; ``mask=`` restricts every step (the per-row
    steps run on the rows the mask selects)."""
    m = _mask_array(mask, x.shape, "rms_norm") if isinstance(x, Tensor) else None
    rows = None
    if m is not None and m is not True and m is not False:
        rows = MaskExpr(_ops.reduce_out_mask(m, _axes(x, axis, "rms_norm"), True))
    elif m is False:
        rows = False
    ms = divide(sum(square(x, mask=mask), axis=axis, keepdims=True, mask=mask), float(n), mask=rows)
    r = rsqrt(add(ms, float(epsilon), mask=rows), mask=rows)
    return multiply(multiply(x, r, mask=mask), w, dtype=dtype, mask=mask)


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.language.{name}")


_tensor_mod.OPS.nl = sys.modules[__name__]   # tile operators map to nl.* (see tensor._Ops)
