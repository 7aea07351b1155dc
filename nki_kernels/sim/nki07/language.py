"""``nki.language`` (NKI 0.6/0.7) on the interpreter's op core (docs/nki-0.7-spec.md §2, §5, §6).

Creation ops, buffers, dtypes, ``nl.load``/``nl.store``, the convenience compute ops (each
returns a new SBUF tile, ``nl.matmul``/``nl.transpose`` a PSUM tile), loops, SPMD/LNC ids.
"""
from __future__ import annotations

import builtins
import contextlib
import enum
import sys

import numpy as np

from . import _core as C
from .lnc import make_scheduling_points
from .tensor import DynSlice, NkiTensor, unwrap

_nl = C.core_nl
_isa = C.core_isa

# ---- dtypes ---------------------------------------------------------------------------------
float32, float16, bfloat16, tfloat32 = C.dt.float32, C.dt.float16, C.dt.bfloat16, C.dt.tfloat32
float8_e4m3, float8_e5m2 = C.dt.float8_e4m3, C.dt.float8_e5m2
# OCP E4M3FN: a NeuronCore-v4 dtype (ISA ``nc_matmul`` data types); tensors of it raise E018 on trn2
float8_e4m3fn = np.dtype(__import__("ml_dtypes").float8_e4m3fn)
int8, uint8, int16, uint16, int32, uint32, bool_ = (C.dt.int8, C.dt.uint8, C.dt.int16, C.dt.uint16,
                                                     C.dt.int32, C.dt.uint32, C.dt.bool_)
# Packed x4 / MX scale dtypes exist as names; creating a tensor of them raises E018 (not modelled).
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4, float8_e8m0fnu = (
    "float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4", "float8_e8m0fnu")

fp32 = _nl.fp32
bfp16 = _nl.bfp16


# ---- buffers (T2) ---------------------------------------------------------------------------
class MemoryRegion(str, enum.Enum):
    sbuf = "sbuf"
    psum = "psum"
    hbm = "hbm"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __repr__(self):
        return f"nl.{self.value}"

    __str__ = __repr__


sbuf, psum, hbm = MemoryRegion.sbuf, MemoryRegion.psum, MemoryRegion.hbm
private_hbm, shared_hbm = MemoryRegion.private_hbm, MemoryRegion.shared_hbm
_REGIONS = {r.value: r for r in MemoryRegion}


def _buf(buffer, api):
    if buffer is None:
        return "sbuf"
    if isinstance(buffer, MemoryRegion):
        return buffer.value
    if isinstance(buffer, str):
        raise C.SimTypeError("E007", api, "buffer", f"string buffer names are not supported (got {buffer!r})",
                             f"Use nl.{buffer}" if buffer in _REGIONS else "Use nl.sbuf, nl.psum or nl.shared_hbm")
    raise C.SimTypeError("E007", api, "buffer", f"unknown buffer {buffer!r}",
                          "Use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm")


def is_hbm(buffer):
    return _buf(buffer, "is_hbm") in C.HBM_KINDS


def is_on_chip(buffer):
    return _buf(buffer, "is_on_chip") in C.ON_CHIP


def is_psum(buffer):
    return _buf(buffer, "is_psum") == "psum"


def is_sbuf(buffer):
    return _buf(buffer, "is_sbuf") == "sbuf"


class _TileSize:
    """Hardware tile limits on trn2 (``nki.language.tile_size``; values as in the 0.1 spec §3)."""
    pmax = C.hw.PMAX
    psum_fmax = C.hw.PSUM_FMAX
    psum_bank_fmax = C.hw.PSUM_FMAX
    psum_bank_fmax_bytes = C.hw.PSUM_BANK_BYTES
    psum_num_banks = C.hw.PSUM_BANKS
    gemm_stationary_fmax = C.hw.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = C.hw.GEMM_MOVING_FMAX
    bn_stats_fmax = C.hw.BN_STATS_FMAX
    psum_min_align = 4
    sbuf_min_align = 1
    total_available_sbuf_size = C.hw.SBUF_BYTES_PER_PARTITION
    sbuf_fmax_bytes = C.hw.SBUF_BYTES_PER_PARTITION
    sbuf_fmax = C.hw.SBUF_BYTES_PER_PARTITION // 4
    sbuf_size_bytes = C.hw.SBUF_BYTES_PER_PARTITION * C.hw.PMAX


tile_size = _TileSize()


# ---- creation (T1-T3) -------------------------------------------------------------------------
def _shape(shape, api):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(shape)
    for s in shape:
        if isinstance(s, C.core_nl.ParDim if hasattr(C.core_nl, "ParDim") else ()) or \
                type(s).__name__ == "ParDim":
            raise C.SimTypeError("E010", api, "shape", "block dimensions (nl.par_dim) were removed: the partition "
                                 "dimension is the leftmost dimension", "Use a list of tiles or fold the block "
                                 "dimension into the free dimensions (see the NKI block-dimension migration guide)")
    return tuple(int(s) for s in shape)


def ndarray(shape, dtype=float32, buffer=sbuf, name="", address=None, **kw):
    """Uninitialised tensor (poisoned in the interpreter); ``address`` is accepted and ignored."""
    b = _buf(buffer, "ndarray")
    shape = _shape(shape, "ndarray")
    if b in C.HBM_KINDS:
        return NkiTensor(_nl.ndarray(shape, dtype, buffer=getattr(_nl, b), name=name))
    t = C.allocate(shape, dtype, b, api="ndarray", name=name)
    if address is not None:
        _placed(t, address, b)
    return NkiTensor(t)


def _placed(t, address, b):
    """``address=(partition_offset, free_offset_bytes)`` (MIG "Improved allocation API"): the kernel
    places the tensor itself (nki-library's allocators reuse addresses), so it is not counted as a new
    live allocation; it must fit the partitions and the buffer's per-partition bytes."""
    api = "ndarray"
    try:
        p0, f0 = (int(a) for a in address)
    except (TypeError, ValueError):
        raise C.SimValueError("E011", api, "address", f"address must be (partition_offset, free_offset), "
                              f"got {address!r}") from None
    C.current(api).memory.release(t.alloc)
    limit = C.hw.SBUF_BYTES_PER_PARTITION if b == "sbuf" else C.hw.PSUM_BYTES_PER_PARTITION
    end = f0 + t.alloc.bytes_per_partition
    if p0 < 0 or p0 + t.shape[0] > C.hw.PMAX:
        raise C.partition_error(api, "address", p0 + t.shape[0])
    if f0 < 0 or end > limit:
        raise C.SimValueError("E006" if b == "sbuf" else "E005", api, "address",
                              f"the tensor at free offset {f0} ends at byte {end} of a {limit}-byte partition",
                              "Place it lower or make it smaller", got=end, limit=limit)
    if b == "psum" and f0 % C.hw.PSUM_BANK_BYTES:
        raise C.SimValueError("E004", api, "address", f"PSUM allocations start at a bank boundary "
                              f"(multiple of {C.hw.PSUM_BANK_BYTES} bytes), got {f0}")


def _filled(api, shape, dtype, buffer, name, value):
    b = _buf(buffer, api)
    t = getattr(_nl, api if api != "full" else "full")
    shape = _shape(shape, api)
    r = t(shape, value, dtype, buffer=getattr(_nl, b), name=name) if api == "full" else \
        t(shape, dtype, buffer=getattr(_nl, b), name=name)
    if b == "psum":
        from .isa import _mark_psum
        _mark_psum(r, 2)
    return NkiTensor(r)


def zeros(shape, dtype=float32, buffer=sbuf, name="", **kw):
    return _filled("zeros", shape, dtype, buffer, name, 0)


def ones(shape, dtype=float32, buffer=sbuf, name="", **kw):
    return _filled("ones", shape, dtype, buffer, name, 1)


def full(shape, fill_value, dtype=float32, buffer=sbuf, name="", **kw):
    return _filled("full", shape, dtype, buffer, name, fill_value)


def _like(x, dtype, buffer):
    return x.shape, (x.dtype if dtype is None else dtype), (buffer if buffer is not None else x.buffer)


def zeros_like(x, dtype=None, buffer=None, name="", **kw):
    s, d, b = _like(x, dtype, buffer)
    return zeros(s, d, buffer=b, name=name)


def ones_like(x, dtype=None, buffer=None, name="", **kw):
    s, d, b = _like(x, dtype, buffer)
    return ones(s, d, buffer=b, name=name)


def full_like(x, fill_value, dtype=None, buffer=None, name="", **kw):
    s, d, b = _like(x, dtype, buffer)
    return full(s, fill_value, d, buffer=b, name=name)


def empty_like(x, dtype=None, buffer=None, name="", **kw):
    s, d, b = _like(x, dtype, buffer)
    return ndarray(s, d, buffer=b, name=name)


ndarray_like = empty_like


def shared_constant(constant, dtype=None, **kw):
    return NkiTensor(_nl.shared_constant(constant, dtype=dtype))


def shared_identity_matrix(n, dtype=uint8, dst=None, **kw):
    """An (n, n) identity tile in SBUF (NL ``shared_identity_matrix``: its examples feed the result
    straight to ``nl.transpose``/``nl.matmul``), or written into ``dst``."""
    api = "shared_identity_matrix"
    ctx = C.current(api)
    n = int(n)
    out = C.fresh(np.eye(n, dtype=np.float32), C.dt.canonical(dtype, op=api), api=api)
    C.record_compute(ctx, "iota", f"nl.{api}", C.POOL, [], out, func="identity")
    if dst is not None:
        from .isa import _land
        _land(api, unwrap(dst), out)
        return dst
    return NkiTensor(out)


def _rng(ctx):
    r = ctx.__dict__.get("_nki07_rng")
    if r is None:
        r = ctx.__dict__["_nki07_rng"] = np.random.default_rng(0)
    return r


def rand(shape, dtype=float32, buffer=sbuf, name="", **kw):
    """Uniform [0, 1) values (NL ``rand``).  The interpreter's generator is NumPy's PCG64 seeded by
    ``random_seed`` (0 by default): the same seed gives the same values, not the hardware's values."""
    api = "rand"
    ctx = C.current(api)
    b = _buf(buffer, api)
    if b not in C.ON_CHIP:
        raise C.SimTypeError("E007", api, "buffer", "nl.rand creates an SBUF or PSUM tile", "Use nl.sbuf")
    shape = _shape(shape, api)
    out = C.fresh(_rng(ctx).random(shape, dtype=np.float32), C.dt.canonical(dtype, op=api), b, api=api)
    C.record_compute(ctx, "rng", "nl.rand", C.POOL, [], out, func="rng")
    return NkiTensor(out)


def random_seed(seed):
    """Seed ``nl.rand`` from a (1, 1) SBUF/PSUM tensor (NL ``random_seed``)."""
    api = "random_seed"
    ctx = C.current(api)
    if not isinstance(seed, NkiTensor) or seed.size != 1:
        raise C.SimTypeError("E010", api, "seed", "the seed is a (1, 1) tensor on SBUF or PSUM",
                             "nl.random_seed(nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf))")
    ctx.__dict__["_nki07_rng"] = np.random.default_rng(int(np.asarray(seed.t.read()).reshape(-1)[0]))


def dropout(x, rate, dtype=None):
    raise C.not_implemented("nki.language.dropout")


def gather_flattened(data, indices, axis=0, dtype=None):
    raise C.not_implemented("nki.language.gather_flattened")


# ---- SPMD / LNC (K4) -----------------------------------------------------------------------------
def program_id(axis=0):
    return _nl.program_id(axis)


def num_programs(axes=0):
    return _nl.num_programs(axes)


def program_ndim():
    return _nl.program_ndim()


# ---- loops (C1-C4) -------------------------------------------------------------------------------
def affine_range(start, stop=None, step=1):
    return _nl.affine_range(*((start,) if stop is None else (start, stop, step)))


def sequential_range(start, stop=None, step=1):
    return _nl.sequential_range(*((start,) if stop is None else (start, stop, step)))


def static_range(start, stop=None, step=1):
    return _nl.static_range(*((start,) if stop is None else (start, stop, step)))


def dynamic_range(start, stop=None, step=1):
    ctx = C.current("dynamic_range")
    ctx.warn_once("dynrange", "nl.dynamic_range is deprecated since NKI 0.6: use nl.fori_loop (MIG 0.5->0.6)")
    r = builtins.range(int(start)) if stop is None else builtins.range(int(start), int(stop), int(step))
    for i in _nl.sequential_range(r.start, r.stop, r.step):
        yield _reg(i)


def _reg(i):
    from .isa import VirtualRegister
    return VirtualRegister(i)


def fori_loop(lower, upper, body_fun, step=1):
    """Runtime loop (C2): ``body_fun(i)`` for i in range(lower, upper, step); returns None."""
    if not isinstance(step, (int, np.integer)) or step < 1:
        raise C.SimValueError("E011", "fori_loop", "step", f"step must be a positive compile-time int, got {step!r}")
    lo, hi = int(lower), int(upper)
    for i in _nl.sequential_range(lo, hi, int(step)):
        r = body_fun(_reg(i))
        if r is not None:
            raise C.SimValueError("E011", "fori_loop", "body_fun", "the fori_loop body cannot return a value",
                                  "Carry loop state in SBUF/HBM tensors")
    return None


def while_loop(init, body_fun):
    """Runtime while loop (C3): runs while the condition register is non-zero."""
    from .isa import VirtualRegister
    r = init
    n = 0
    while int(r) != 0:
        r = body_fun(VirtualRegister(int(r)))
        if not hasattr(r, "__nki_register__") and not isinstance(r, (int, np.integer)):
            raise C.SimValueError("E011", "while_loop", "body_fun", "the while_loop body must return the next "
                                 "condition register", "End the body with `return r`")
        n += 1
        if n > 10_000_000:   # pragma: no cover - a guard, not a semantic
            raise C.SimRuntimeError("E011", "while_loop", None, "more than 10^7 iterations")
    return None


@contextlib.contextmanager
def no_reorder():
    """Scheduling hint: instructions in the block keep program order (the interpreter always does)."""
    yield


# ---- indexing helpers ----------------------------------------------------------------------------
def ds(start, size, step=1):
    return DynSlice(start, size, step)


def expand_dims(x, axis):
    return x.expand_dim(axis)


# ---- data movement (L2) ----------------------------------------------------------------------------
def load(src, dtype=None, **kw):
    return NkiTensor(_nl.load(unwrap(src), dtype=dtype))


def store(dst, value, **kw):
    _nl.store(unwrap(dst), unwrap(value))


def load_transpose2d(src, dtype=None, **kw):
    return NkiTensor(_nl.load_transpose2d(unwrap(src), dtype=dtype))


def copy(x, dtype=None, **kw):
    """SBUF/PSUM tile -> new SBUF tile on VectorE (RN 0.6: ``nl.copy`` uses ``tensor_copy``)."""
    return NkiTensor(_isa.tensor_copy(unwrap(x), dtype=dtype, engine=_isa.engine.vector, _api="nl.copy"))


copy._nki_op = "copy"


def broadcast_to(x, shape, dtype=None, **kw):
    r = _nl.broadcast_to(unwrap(x), tuple(shape))
    return NkiTensor(r) if dtype is None else copy(NkiTensor(r), dtype=dtype)


def matmul(x, y, transpose_x=False, **kw):
    if not transpose_x:
        C.current("matmul").warn_once("nlmatmul", "nl.matmul without transpose_x=True fails to compile on "
                                      "hardware (NKI 0.5/0.6 known issue); pass a pre-transposed x")
    return NkiTensor(_nl.matmul(unwrap(x), unwrap(y), transpose_x=transpose_x))


def transpose(x, dtype=None, **kw):
    return NkiTensor(_nl.transpose(unwrap(x), dtype=dtype))


def device_print(print_prefix, tensor=None, **kw):
    _nl.device_print(print_prefix, unwrap(tensor))


# ---- elementwise ops (L1, L3, L4) -------------------------------------------------------------------
def _unary(name):
    core = getattr(_nl, name)

    def op(x, dtype=None, **kw):
        return NkiTensor(core(unwrap(x), dtype=dtype))
    op.__name__ = name
    op._nki_op = name
    return op


def _warn_broadcast(api, x, y):
    if x.__class__ is NkiTensor and y.__class__ is NkiTensor and x.t._shape != y.t._shape:
        C.current(api).warn_once("nlbcast", f"nl.{api} of tiles {x.shape} and {y.shape}: binary nl.* ops do not "
                                 "support broadcasting on hardware (NKI 0.5/0.6 known issue)")


def _binary(name):
    core = getattr(_nl, name)

    def op(x, y, dtype=None, **kw):
        if x is None or y is None:
            if name in ("equal", "not_equal"):
                return (x is y) == (name == "equal")
            raise C.SimTypeError("E010", name, "y" if y is None else "x", "operand is None")
        _warn_broadcast(name, x, y)
        r = core(unwrap(x), unwrap(y), dtype=dtype)
        return NkiTensor(r) if isinstance(r, C.Tensor) else r
    op.__name__ = name
    op._nki_op = name
    return op


_mod = sys.modules[__name__]
for _n in C.UNARY:
    if _n not in ("identity", "copy") and hasattr(_nl, _n):
        setattr(_mod, _n, _unary(_n))
for _n in list(C.BINARY) + list(C.BITWISE):
    if _n not in ("max", "min") and hasattr(_nl, _n):
        setattr(_mod, _n, _binary(_n))

_divide_core = _binary("divide")


def divide(x, y, dtype=None, **kw):
    if isinstance(x, NkiTensor) or isinstance(y, NkiTensor):
        C.current("divide").warn_once("nldivide", "nl.divide is not supported on hardware (NKI 0.5/0.6 known "
                                      "issue); use nl.multiply(x, nl.reciprocal(y))")
    return _divide_core(x, y, dtype=dtype)


divide._nki_op = "divide"


def _custom(name, fn, nargs, engine):
    """Ops with no core table entry: one vectorised NumPy call, recorded like the core's ops."""
    def op(*args, dtype=None, **kw):
        api = name
        ctx = C.current(api)
        xs = args[:nargs]
        tiles = [unwrap(a) for a in xs]
        for i, t in enumerate(tiles):
            if isinstance(t, C.Tensor):
                C.check_tile(t, api, "xy"[i] if nargs == 2 else "x")
        vals = [t.read_f32() if isinstance(t, C.Tensor) else np.float32(t) for t in tiles]
        r = np.asarray(fn(*vals), dtype=np.float32)
        first = next(t for t in tiles if isinstance(t, C.Tensor))
        d = first.dtype if dtype is None else C.dt.canonical(dtype, op=api)
        out = C.fresh(np.ascontiguousarray(r), d, api=api)
        C.record_compute(ctx, "tensor_tensor" if nargs == 2 else "activation", f"nl.{name}", engine,
                         tiles, out, func=name)
        return NkiTensor(out)
    op.__name__ = name
    op._nki_op = name
    return op


# the operand with the larger (smaller) magnitude, signed; y on ties (NL ``abs_max`` examples)
abs_max = _custom("abs_max", lambda a, b: np.where(np.abs(a) > np.abs(b), a, b), 2, C.DVE)
abs_min = _custom("abs_min", lambda a, b: np.where(np.abs(a) < np.abs(b), a, b), 2, C.DVE)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


gelu_apprx_sigmoid_dx = _custom(
    "gelu_apprx_sigmoid_dx", lambda x: _sig(1.702 * x) * (1 + 1.702 * x * (1 - _sig(1.702 * x))), 1, C.ACT)
bypass = copy
prelu = "prelu"      # an activation-function name; nisa.activation(op=nl.prelu) raises E021
average = "average"


def where(condition, x, y, dtype=None, **kw):
    return NkiTensor(_nl.where(unwrap(condition), unwrap(x), unwrap(y), dtype=dtype))


# ---- reductions (L6) -----------------------------------------------------------------------------------
def _norm_axis(x, axis):
    nd = x.ndim
    if isinstance(axis, (list, tuple)):
        return tuple(a % nd if a < 0 else a for a in axis)
    return axis % nd if axis < 0 else axis


def _reduction(name):
    core = getattr(_nl, name)

    def op(x, axis, dtype=None, keepdims=False, **kw):
        return NkiTensor(core(unwrap(x), _norm_axis(x, axis), dtype=dtype, keepdims=keepdims))
    op.__name__ = name
    op._nki_op = getattr(core, "_nki_op", name)
    return op


sum = _reduction("sum")
max = _reduction("max")
min = _reduction("min")
mean = _reduction("mean")
prod = _reduction("prod")
var = _reduction("var")


def all(x, axis, dtype=None, **kw):
    return NkiTensor(_nl.all(unwrap(x), _norm_axis(x, axis), dtype=dtype))


def softmax(x, axis=-1, dtype=None, **kw):
    return NkiTensor(_nl.softmax(unwrap(x), _norm_axis(x, axis), dtype=dtype))


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None, **kw):
    return NkiTensor(_nl.rms_norm(unwrap(x), unwrap(w), _norm_axis(x, axis), n, epsilon, dtype=dtype))


NKIObject = object
tensor = NkiTensor


# every NKI call is a scheduling point of an LNC launch (lnc.py)
make_scheduling_points(globals(), __name__, skip=['affine_range', 'ds', 'dynamic_range', 'expand_dims', 'fori_loop', 'is_hbm', 'is_on_chip', 'is_psum', 'is_sbuf', 'no_reorder', 'num_programs', 'program_id', 'program_ndim', 'sequential_range', 'static_range', 'while_loop'])
__getattr__ = C.module_getattr("nki.language")
