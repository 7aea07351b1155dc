"""Shared instruction machinery: operand checks, op-code tables, assignment, `+=`, DMA.

Each NKI instruction in language.py / isa.py is one small function that (1) validates
its operands with the helpers here, (2) computes with one vectorised NumPy call in fp32,
(3) records one trace event, and returns a fresh tile or writes its destination.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from . import limits
from .context import current
from .errors import NKISyntaxError, SimTypeError, SimValueError, partition_error
from . import tensor as _tensor_mod
from .indexing import mask_array
from .tensor import HBM_KINDS, ON_CHIP, Tensor
from .trace import ACT, DMA, DVE, PE

# ---------------------------------------------------------------------------------------
# op codes: nl.add / np.add / "add" all name the same ALU op
# ---------------------------------------------------------------------------------------


def _erf(x):
    # Abramowitz & Stegun 7.1.26 refined with one Newton step is overkill; use math.erf
    # through frompyfunc only for tiny inputs, else a 1.5e-7-accurate rational form.
    a1, a2, a3, a4, a5, p = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911
    s = np.sign(x)
    ax = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + p * ax)
    y = 1.0 - (((((a5 * t + a4) * t) + a3) * t + a2) * t + a1) * t * np.exp(-ax * ax)
    return (s * y).astype(np.float32)


def _sigmoid(x):
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


_SQ2 = np.float32(math.sqrt(2.0))
_SQ2PI = np.float32(math.sqrt(2.0 / math.pi))

# name -> (fp32 function, default engine)
UNARY = {
    "exp": (np.exp, ACT), "log": (np.log, ACT), "sqrt": (np.sqrt, ACT),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), ACT), "reciprocal": (lambda x: 1.0 / x, ACT),
    "square": (np.square, ACT), "negative": (np.negative, DVE), "abs": (np.abs, DVE),
    "sign": (np.sign, ACT), "sin": (np.sin, ACT), "cos": (np.cos, ACT), "tan": (np.tan, ACT),
    "tanh": (np.tanh, ACT), "arctan": (np.arctan, ACT), "erf": (_erf, ACT),
    "erf_dx": (lambda x: np.float32(2 / math.sqrt(math.pi)) * np.exp(-x * x), ACT),
    "sigmoid": (_sigmoid, ACT), "relu": (lambda x: np.maximum(x, 0), ACT),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / _SQ2)), ACT),
    "gelu_dx": (lambda x: 0.5 * (1 + _erf(x / _SQ2)) + x * np.exp(-0.5 * x * x) / np.float32(math.sqrt(2 * math.pi)), ACT),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(_SQ2PI * (x + 0.044715 * x ** 3))), ACT),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), ACT),
    "silu": (lambda x: x * _sigmoid(x), ACT),
    "silu_dx": (lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), ACT),
    "softplus": (lambda x: np.logaddexp(0, x), ACT),
    "mish": (lambda x: x * np.tanh(np.logaddexp(0, x)), ACT),
    "ceil": (np.ceil, DVE), "floor": (np.floor, DVE), "trunc": (np.trunc, DVE),
    "copy": (lambda x: x, ACT), "identity": (lambda x: x, ACT),
    "logical_not": (lambda x: (x == 0), DVE), "invert": (None, DVE),
}

# name -> fp32 binary function; comparisons/logical return bool
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": np.power, "maximum": np.maximum, "minimum": np.minimum, "max": np.maximum,
    "min": np.minimum, "fmod": np.fmod, "mod": np.mod, "floor_divide": np.floor_divide,
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}
BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "left_shift": np.left_shift, "right_shift": np.right_shift}
COMPARE = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
           "logical_and", "logical_or", "logical_xor"}
REDUCE = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "max": np.max, "minimum": np.min,
          "min": np.min, "logical_and": np.all, "logical_or": np.any,
          "bitwise_and": np.bitwise_and.reduce, "bitwise_or": np.bitwise_or.reduce,
          "bitwise_xor": np.bitwise_xor.reduce}

_NP_CODES = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.power: "power", np.maximum: "maximum", np.minimum: "minimum", np.fmod: "fmod",
    np.mod: "mod", np.equal: "equal", np.not_equal: "not_equal", np.greater: "greater",
    np.greater_equal: "greater_equal", np.less: "less", np.less_equal: "less_equal",
    np.logical_and: "logical_and", np.logical_or: "logical_or", np.logical_xor: "logical_xor",
    np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift", np.right_shift: "right_shift", np.exp: "exp", np.log: "log",
    np.sqrt: "sqrt", np.square: "square", np.tanh: "tanh", np.abs: "abs", np.negative: "negative",
    np.sign: "sign", np.sin: "sin", np.cos: "cos", np.tan: "tan", np.arctan: "arctan",
    np.ceil: "ceil", np.floor: "floor", np.trunc: "trunc", np.copy: "copy", np.reciprocal: "reciprocal",
    np.max: "max", np.min: "min", np.sum: "add", np.prod: "multiply", np.floor_divide: "floor_divide",
}
try:  # numpy aliases
    _NP_CODES[np.amax] = "max"
    _NP_CODES[np.amin] = "min"
except AttributeError:  # pragma: no cover
    pass


_MASKED_REDUCE = {
    "sum": (np.sum, None), "add": (np.sum, None), "prod": (np.prod, None), "multiply": (np.prod, None),
    "max": (np.max, -np.inf), "maximum": (np.max, -np.inf), "min": (np.min, np.inf), "minimum": (np.min, np.inf),
    "mean": (np.mean, None), "var": (np.var, None),
}


def masked_reduce(name, v, axes, keepdims, m) -> np.ndarray:
    """Reduce only the elements ``m`` selects (a reduction's mask= selects inputs)."""
    if m is False:
        m = np.zeros(v.shape, bool)
    if name in ("all", "logical_and"):
        return np.all(v != 0, axis=axes, keepdims=keepdims, where=m).astype(np.float32)
    if name in ("logical_or",):
        return np.any(v != 0, axis=axes, keepdims=keepdims, where=m).astype(np.float32)
    fn, init = _MASKED_REDUCE[name]
    kw = {} if init is None else {"initial": init}
    return np.asarray(fn(v, axis=axes, keepdims=keepdims, where=m, **kw), dtype=np.float32)


def reduce_out_mask(m, axes, keepdims):
    """The outputs of a masked reduction that have at least one selected input."""
    if m is False:
        return False
    return np.any(m, axis=axes, keepdims=keepdims)


def opcode(op, api: str, arg: str = "op") -> str:
    """Name of an ALU op given as nl.X, np.X or a string."""
    if isinstance(op, str):
        return op
    name = getattr(op, "_nki_op", None)
    if name is not None:
        return name
    try:
        if op in _NP_CODES:
            return _NP_CODES[op]
    except TypeError:
        pass
    raise NKISyntaxError("E021", api, arg, f"{getattr(op, '__name__', op)!r} is not supported in '{api}'",
                         "Pass an nl.* op such as nl.add, nl.multiply, nl.maximum, nl.exp")


# ---------------------------------------------------------------------------------------
# operand validation
# ---------------------------------------------------------------------------------------

def _space_error(api, arg, t, allowed):
    want = "hbm" if allowed == HBM_KINDS else "|".join(a for a in allowed)
    got = t.buffer
    return SimTypeError("E007", api, arg,
                        f"Expected operand '{arg}' of '{api}' to be in address space '{want}', but got a "
                        f"tile in '{got}' instead",
                        {"hbm": "Load it into SBUF first (nl.load / nisa.dma_copy)",
                         "psum": "Copy it out of PSUM first (nisa.tensor_copy)",
                         "sbuf": "Use an SBUF/PSUM tile"}.get(got, "Move it to the right buffer"))


def tile(x, api: str, arg: str, buffers=ON_CHIP, engine_access: bool = True) -> Tensor:
    """Check that ``x`` is a tile (partition axis first) in one of ``buffers``; with
    ``engine_access`` (a compute-engine operand, not a DMA side) also the partition access rules."""
    if not isinstance(x, Tensor):
        raise SimTypeError("E010", api, arg, f"expected a tile, got {type(x).__name__}",
                           "Pass an SBUF/PSUM tile (e.g. from nl.load or nl.ndarray)")
    if x.buffer not in buffers:
        raise _space_error(api, arg, x, buffers)
    if x.buffer in ON_CHIP and x.par != 0:
        raise SimTypeError("E010", api, arg,
                           f"Failed to infer tile from tensor '{x.name}': its partition axis is not the "
                           f"leading axis of the access {x.shape}",
                           "Index the block dimensions with ints so the nl.par_dim axis comes first")
    if x.shape and x.shape[0] > limits.PMAX:
        raise partition_error(api, arg, x.shape[0])
    if engine_access and x.buffer in ON_CHIP:
        a = x.arr
        # fast path: a basic view starting at partition 0 with unit partition stride, <= 4 free axes
        if not (x.off == 0 and a is not None and a.ndim <= 5 and
                (a.shape[0] == 1 or a.strides[0] == x.alloc.row_bytes)):
            _partition_access(x, api, arg)
    return x


def _start_partition(x: Tensor) -> tuple[int, int]:
    """(first partition, partition step) of an on-chip access."""
    al = x.alloc
    if x.arr is not None:
        row = al.row_bytes
        start = x.off // row if row else 0
        step = abs(x.arr.strides[0]) // row if row and x.arr.ndim and x.arr.shape[0] > 1 else 1
        return start, step
    if al.par_axis:
        return 0, 1          # an index view of a block-dimension tensor: blocks start at partition 0
    k = x.key[0] if x.key else 0
    if isinstance(k, np.ndarray):
        v = np.unique(k)
        step = int(np.min(np.diff(v))) if v.size > 1 else 1
        if v.size > 1 and not np.all(np.diff(v) == step):
            step = -1
        return int(v.min()) + x.off // al.row_bytes if al.row_bytes else int(v.min()), step
    return int(k), 1


def _partition_access(x: Tensor, api, arg) -> None:
    """SBUF/PSUM access rules of a compute-engine operand (SDK 2.26 arch guide
    general/nki/arch/trainium_inferentia2_arch.rst, "Data streaming"): no partition striding (a
    tile occupies consecutive partitions); start_partition 0 for 64 < P <= 128, 0/64 for
    32 < P <= 64, 0/32/64/96 for P <= 32; at most a 4-D access pattern along the free axes."""
    n = x._shape[0] if x._shape else 1
    start, step = _start_partition(x)
    if n > 1 and step != 1:
        raise SimValueError("E026", api, arg, f"the access of '{x.name}' strides the partition axis (step "
                            f"{step}); hardware does not allow partition striding",
                            "Access consecutive partitions (copy a strided selection with a DMA first)")
    allowed = (0,) if n > 64 else (0, 64) if n > 32 else (0, 32, 64, 96)
    if start not in allowed:
        raise SimValueError("E026", api, arg, f"an access of {n} partitions of '{x.name}' starts at partition "
                            f"{start}; allowed starts for {n} partitions: {'/'.join(map(str, allowed))}",
                            "Start the tile slice at an allowed partition (or allocate a separate tile)",
                            got=start, limit="/".join(map(str, allowed)))
    a = x.arr
    if a is not None and a.ndim > 5:
        dims = [(d, st) for d, st in zip(a.shape[1:], a.strides[1:]) if d != 1]
        merged = []
        for d, st in dims:
            if merged and merged[-1][1] == st * d:
                merged[-1] = (merged[-1][0] * d, st)
            else:
                merged.append((d, st))
        if len(merged) > 4:
            raise SimValueError("E026", api, arg, f"the access of '{x.name}' {tuple(x.shape)} needs a "
                                f"{len(merged)}-D free-axis access pattern; engines support up to 4-D",
                                "Reshape contiguous free axes together or split the instruction",
                                got=len(merged), limit=4)


def hbm(x, api: str, arg: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise SimTypeError("E007", api, arg, f"expected an HBM tensor, got {type(x).__name__}")
    if x.buffer not in HBM_KINDS:
        raise _space_error(api, arg, x, HBM_KINDS)
    return x


def same_partitions(api, **tiles):
    it = iter(tiles.values())
    p0 = next(it)._shape[0]
    if all(t._shape[0] == p0 for t in it):
        return
    ps = {k: v.shape[0] for k, v in tiles.items() if isinstance(v, Tensor)}
    if len(set(ps.values())) > 1:
        desc = ", ".join(f"{k}{list(tiles[k].shape)}" for k in ps)
        raise SimValueError("E002", api, None,
                            f"number of partitions (dimension 0 size of a tile) mismatch in parameters "
                            f"({desc}) of '{api}'", "Slice the operands to the same partition range")


def pa_pad(a: np.ndarray, nd: int) -> np.ndarray:
    """Partition-aligned broadcasting: pad trailing 1s (spec §5: (P,) behaves as (P,1))."""
    if a.ndim < nd:
        return a.reshape(a.shape + (1,) * (nd - a.ndim))
    return a


def pa_shape(api, *shapes):
    nd = max(len(s) for s in shapes)
    padded = [tuple(s) + (1,) * (nd - len(s)) for s in shapes]
    try:
        return np.broadcast_shapes(*padded)
    except ValueError:
        raise SimValueError("E011", api, None, "Parameter shapes " + ", ".join(str(tuple(s)) for s in shapes)
                            + " could not be broadcast together",
                            "Operands must match or broadcast partition-first ((P,1) or (1,F) against (P,F))") \
            from None


def free_size(shape) -> int:
    n = 1
    for s in shape[1:]:
        n *= s
    return n


def value_of(x, mask=None):
    """fp32 array of a tile, or the scalar itself."""
    if isinstance(x, Tensor):
        return x.read_f32(mask)
    return x


def dtype_of(x):
    return x.dtype if isinstance(x, Tensor) else dt.scalar_dtype(x)


def out_dtype(dtype, default, api):
    return default if dtype is None else dt.canonical(dtype, op=api)


def _strided(t: Tensor) -> bool:
    """Does the innermost free axis step more than 16 bytes (no VectorE fast mode)?  For an
    arange/mgrid view the step is read off its index arrays: an identity t[i.p, i.x] is not
    strided (issue 9 item 1)."""
    a = t.arr
    if a is not None:
        return a.ndim >= 2 and a.shape[-1] > 1 and abs(a.strides[-1]) > 16
    shape = t._shape
    if len(shape) < 2 or shape[-1] < 2:
        return False
    step = 0
    for k, st in zip(t.key, t.src.strides):
        if isinstance(k, np.ndarray) and k.shape[-1] > 1:
            row = k.reshape(-1, k.shape[-1])[0]
            d = np.diff(row)
            if d.size and not np.all(d == d[0]):
                return True
            step += int(d[0]) * st if d.size else 0
    return abs(step) > 16


def record_compute(ctx, op, api, engine, inputs, out: Tensor, *, n_ops=1, func="", flops_per_elem=1,
                   extra_meta=None):
    """Record an elementwise-class instruction producing ``out`` from ``inputs`` (through the one
    recording path, RunContext.record)."""
    if not ctx.options.trace:
        return ctx.record(op, api, engine, result=out.alloc)
    oshape = out._shape
    oal = out.alloc
    par = out.par or 0
    # partitions = the partition axis, also of a block-dimension tile (nl.zeros((n, par_dim(128), F))
    # spans 128 partitions, n*F elements each -- issue 9 item 1)
    P = oshape[par] if oshape else 1
    N = out.size // P if P else 0
    psum_in = strided = False
    nbytes = out.size * oal.itemsize
    in_shapes, in_dtypes, reads = [], [], []
    for t in inputs:
        if t.__class__ is not Tensor:
            continue
        al = t.alloc
        shp = t._shape
        n = free_size(shp)
        if n > N:
            N = n
        if al.buffer == "psum":
            psum_in = True
        if not strided and _strided(t):
            strided = True
        nbytes += t.size * al.itemsize
        in_shapes.append(shp)
        in_dtypes.append(al.dname)
        reads.append(t.region())
    meta = {"psum_in": psum_in, "psum_out": oal.buffer == "psum", "func": func, "n_ops": n_ops,
            "strided": strided}
    if extra_meta:
        meta.update(extra_meta)
    ev = ctx.record(op, api, engine, P, N, in_shapes, oshape, in_dtypes, oal.dname, nbytes,
                    P * N * n_ops * flops_per_elem, reads, [out.region()], meta, False, oal)
    out._event = ev
    return ev


# ---------------------------------------------------------------------------------------
# assignment and +=
# ---------------------------------------------------------------------------------------

def _same_key(ka, kb) -> bool:
    if isinstance(ka, np.ndarray) or isinstance(kb, np.ndarray):
        return isinstance(ka, np.ndarray) and isinstance(kb, np.ndarray) and \
            (ka is kb or ka.shape == kb.shape and np.array_equal(ka, kb))
    return ka == kb


def _same_region(a: Tensor, b: Tensor) -> bool:
    """Is ``b`` the very view ``a`` (the write-back half of ``view[...] += x``)?"""
    if a.alloc is not b.alloc:
        return False
    if a.arr is None or b.arr is None:
        # `t[i_p, i_f] += x` writes back its own arange view: no extra copy (issue 9 item 1)
        return a.arr is None and b.arr is None and a.src is b.src and a.off == b.off and \
            a._shape == b._shape and len(a.key) == len(b.key) and all(map(_same_key, a.key, b.key))
    return a.off == b.off and a.arr.shape == b.arr.shape and a.arr.strides == b.arr.strides


def _fit(api, value_shape, dst_shape, dst_name):
    """How a value of value_shape lands in dst_shape: 'same' | 'reshape' | 'broadcast'."""
    if tuple(value_shape) == tuple(dst_shape):
        return "same"
    nd = max(len(value_shape), len(dst_shape))
    vs = tuple(value_shape) + (1,) * (nd - len(value_shape))
    ds = tuple(dst_shape) + (1,) * (nd - len(dst_shape))
    if vs == ds or int(np.prod(value_shape)) == int(np.prod(dst_shape)) and \
            tuple(s for s in value_shape if s != 1) == tuple(s for s in dst_shape if s != 1):
        return "reshape"
    try:
        if np.broadcast_shapes(vs, ds) == ds:
            return "broadcast"
    except ValueError:
        pass
    raise SimValueError("E011", api, dst_name,
                        f"Illegal assignment destination shape in 'a = b': destination {tuple(dst_shape)} "
                        f"cannot hold value {tuple(value_shape)}",
                        "Slice the destination to the value's shape")


def _place(value: np.ndarray, dst_shape, how):
    if how == "same":
        return value
    if how == "reshape":
        return value.reshape(dst_shape)
    nd = len(dst_shape)
    return np.broadcast_to(pa_pad(value, nd), dst_shape)


def _landing_mask(m, value: Tensor, dst_shape, how):
    """Where an instruction result lands in its destination: the assignment's mask and the
    producing instruction's own mask= (a masked instruction leaves the rest of an existing
    destination untouched -- issue 8 item 15; poison belongs to memory nobody wrote)."""
    vm = value._mask
    if vm is None or vm is True:
        return m
    if vm is False:
        return False
    vm = _place(vm, dst_shape, how)
    if m is None or m is True:
        return vm
    if m is False:
        return False
    return m & vm


def assign(dst: Tensor, value, *, api="dst[...] = value", mask=None):
    """``dst[...] = value``: a copy (or memset) into dst; an instruction result lands directly."""
    ctx = current(api)
    m = mask_array(mask, dst.shape, api)
    if isinstance(value, Tensor):
        if _same_region(dst, value):
            return  # `t[...] += x` writes back its own view: already done
        how = _fit(api, value.shape, dst.shape, dst.name)
        _check_dma_destination(value, dst, api)
        if value.is_fresh() and value._event is not None and dst.buffer in ON_CHIP \
                and value.buffer in ON_CHIP:
            ev = value._event
            lm = _landing_mask(m, value, dst.shape, how)
            if ev.engine == PE and dst.buffer != "psum":
                # TensorE writes only PSUM ("nc_matmul must write outputs to PSUM", 2.26 isa doc):
                # `sbuf[...] = nc_matmul(...)` / `= nc_transpose(...)` is the PSUM result plus a
                # copy into SBUF -- 2.26 nl.store: "an extra copy will be performed"; the errors
                # doc describes assignment as a copy (issue 8 item 1).  The copy is an eviction.
                dst.write(_place(value._exact, dst.shape, how), lm, api=api)
                record_compute(ctx, "tensor_copy", api, DVE, [value], dst, func="copy",
                               extra_meta={"eviction": True})
                return
            # the producing instruction writes dst directly (rounded once to dst's dtype)
            dst.write(_place(value._exact, dst.shape, how), lm, api=api)
            _retarget(ctx, ev, dst)
            ctx.memory.release(value.alloc)
            return
        if dst.buffer in ON_CHIP and value.buffer in ON_CHIP:
            tile(value, api, "value")
            dst.write(_place(value.read(), dst.shape, how), m, api=api)
            record_compute(ctx, "tensor_copy", api, DVE, [value], dst, func="copy",
                           extra_meta={"eviction": True} if value.buffer == "psum" and dst.buffer == "sbuf"
                           else None)
            return
        dma_transfer(dst, value, api=api, mask=m, how=how)
        return
    if isinstance(value, (int, float, np.integer, np.floating, bool, np.bool_)):
        dst.write(value, m, api=api)
        if dst.buffer in ON_CHIP:
            record_compute(ctx, "memset", api, DVE, [], dst, func="memset")
        else:
            _record_dma(ctx, api, dst, None, dst.size)
        return
    raise SimTypeError("E010", api, "value", f"cannot assign a {type(value).__name__} to an NKI tensor",
                       "Assign a tile (e.g. the result of nl.load / nisa.tensor_copy) or a scalar")


def _retarget(ctx, ev, dst: Tensor, accumulate=False) -> None:
    """The recorded instruction ``ev`` wrote its fresh result straight into ``dst`` (results land
    in their destination; an accumulation also reads it)."""
    r = dst.region()
    if accumulate:
        ev.reads.append(r)
    ev.writes = [r]
    ev.out_dtype = dt.name_of(dst.dtype)
    ev.meta["psum_out"] = dst.buffer == "psum"
    if ctx.memory.blocks:
        ctx.memory.block_liveness((), ev.writes)


def _check_dma_destination(value, dst, api):
    """DMA cannot write PSUM: a fresh load result cannot land in a PSUM tile."""
    ev = value._event if isinstance(value, Tensor) and value.is_fresh() else None
    if ev is not None and ev.engine == DMA and dst.buffer == "psum":
        raise SimTypeError("E007", api, dst.name,
                           f"Expected the destination of '{ev.op}' to be in address space 'sbuf|hbm', but got a "
                           f"tile in 'psum' instead", "DMA cannot write PSUM: load into SBUF")


def accumulate(dst: Tensor, other, opname: str):
    """``dst += other`` (and -=, *=, /=).  Matmul results accumulate in PSUM for free (spec §8)."""
    api = {"add": "+=", "subtract": "-=", "multiply": "*=", "divide": "/="}[opname]
    ctx = current(api)
    _check_dma_destination(other, dst, api)
    if isinstance(other, Tensor) and opname == "add" and dst.buffer == "psum" and other.is_fresh() \
            and other._event is not None and other._event.op == "nc_matmul":
        how = _fit(api, other.shape, dst.shape, dst.name)
        cur = dst.read_raw()
        pm = dt.poison_mask(cur) if dst.alloc.unwritten else None
        if pm is not None and pm.any():
            # the first `psum += nc_matmul(...)` into never-written PSUM overwrites: official
            # samples accumulate into nl.ndarray(..., buffer=nl.psum) (spec Corrections 8,
            # issue 8 item 4); per element, so a partly written accumulator is handled too
            cur = np.where(pm, np.float32(0), cur)
        acc = cur.astype(np.float32, copy=False) + _place(other._exact, dst.shape, how)
        dst.write(acc, _landing_mask(None, other, dst.shape, how), api=api)
        ev = other._event
        ev.accumulate = True
        _retarget(ctx, ev, dst, accumulate=True)
        ctx.memory.release(other.alloc)
        return dst
    if ctx.options.warn_non_psum_accumulate:
        # `sbuf += nl.matmul(...)`, `sbuf += psum_tile` are legal NKI 0.1: a VectorE
        # read-modify-write (spec §8; issue 8 item 18) -- warned, never raised
        what = "a matmul result accumulated into PSUM" if dst.buffer != "psum" else "a matmul result"
        ctx.warn_once("iadd", f"`{api}` on a {dst.buffer.upper()} tile with something other than "
                      f"{what} is a VectorE read-modify-write; only `psum += nc_matmul(...)` is "
                      f"reliable on hardware (spec §8, aws-neuron-sdk#1051)")
    if dst.buffer not in ON_CHIP:
        raise SimTypeError("E007", api, dst.name, f"`{api}` needs an SBUF/PSUM destination, got {dst.buffer}",
                           "Accumulate on chip, then store")
    tile(dst, api, "dst")
    b = value_of(other)
    if isinstance(other, Tensor):
        tile(other, api, "value")
        b = pa_pad(b, dst.ndim)
    res = BINARY[opname](dst.read_f32(), b)
    dst.write(res, api=api)
    record_compute(ctx, "tensor_tensor" if isinstance(other, Tensor) else "tensor_scalar", api, DVE,
                   [dst, other], dst, func=opname)
    return dst


# ---------------------------------------------------------------------------------------
# DMA
# ---------------------------------------------------------------------------------------

def _contiguity(t: Tensor):
    """(bytes per contiguous run, number of runs) of an HBM access."""
    isz = t.itemsize
    if t.size == 0:
        return (0, 0)
    if t.arr is not None:
        a = t.arr
        run, expect = 1, a.itemsize
        for n, s in zip(reversed(a.shape), reversed(a.strides)):
            if n == 1:
                continue
            if s != expect:
                break
            run *= n
            expect *= n
        return (run * isz, max(1, t.size // run))
    # advanced: linear offsets of every point, count breaks
    strides = [s // t.src.itemsize for s in t.src.strides]
    off = 0
    for k, s in zip(t.key, strides):
        off = off + (np.broadcast_to(k, t.shape) if isinstance(k, np.ndarray) else k) * s
    off = np.asarray(np.broadcast_to(off, t.shape)).ravel()
    breaks = int(np.count_nonzero(np.diff(off) != 1)) + 1
    return (max(1, t.size // breaks) * isz, breaks)


def _record_dma(ctx, api, dst, src, n_elems, *, op="dma_copy", extra=None):
    if not ctx.options.trace:
        return None
    side = src if (src is not None and src.buffer in HBM_KINDS) else dst
    if side.buffer not in HBM_KINDS and src is not None:
        side = src
    contig, desc = _contiguity(side)
    onchip = dst if dst.buffer in ON_CHIP else (src if src is not None and src.buffer in ON_CHIP else dst)
    P = onchip.shape[0] if onchip.shape else 1
    isz = side.itemsize
    meta = {"src": src.buffer if src is not None else "const", "dst": dst.buffer,
            "contiguous_bytes": contig, "descriptors": desc}
    if extra:
        meta.update(extra)
    return ctx.record(op, api, DMA, partitions=P, free_elems=max(1, n_elems // max(P, 1)),
                      in_shapes=[src.shape] if src is not None else [], out_shape=dst.shape,
                      in_dtypes=[dt.name_of(src.dtype)] if src is not None else [],
                      out_dtype=dt.name_of(dst.dtype), nbytes=n_elems * isz,
                      reads=[src.region()] if src is not None else [], writes=[dst.region()], meta=meta)


def dma_transfer(dst: Tensor, src: Tensor, *, api, mask=None, how=None, rmw=None, op="dma_copy"):
    """Move src -> dst (HBM/SBUF, never PSUM).  ``how``: placement rule (see _fit)."""
    ctx = current(api)
    for arg, t in (("dst", dst), ("src", src)):
        if t.buffer == "psum":
            raise SimTypeError("E007", api, arg,
                               f"Expected operand '{arg}' of '{api}' to be in address space 'hbm|sbuf', but "
                               f"got a tile in 'psum' instead", "DMA cannot access PSUM: copy the tile to "
                               "SBUF with nisa.tensor_copy first")
    if how is None:
        if src.size != dst.size:
            raise SimValueError("E011", api, None,
                                f"DMA source {src.shape} ({src.size} elements) and destination {dst.shape} "
                                f"({dst.size} elements) differ in element count",
                                "Slice both sides to the same number of elements")
        how = "same" if src.shape == dst.shape else "reshape"
    m = mask
    src_mask = m if (m is not None and not isinstance(m, bool) and how == "same") else None
    v = src.read(src_mask) if m is not False else None
    if m is not False:
        if how == "reshape" and src.shape != dst.shape:
            v = np.ascontiguousarray(v).reshape(dst.shape)
        else:
            v = _place(v, dst.shape, how)
        if rmw is not None:
            v = BINARY[rmw](dst.read_f32(), v.astype(np.float32))
        dst.write(v, m, api=api)
    return _record_dma(ctx, api, dst, src, dst.size, op=op)


_tensor_mod.OPS.assign = assign            # Tensor.__setitem__ / += (see tensor._Ops)
_tensor_mod.OPS.accumulate = accumulate
