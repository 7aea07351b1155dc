"""``nki.isa`` (NKI 0.6/0.7): ``dst``-first instructions that return nothing (docs/nki-0.7-spec.md §4).

Each instruction validates its 0.7-specific arguments, runs the op core's implementation of
the same instruction (the same checks, NumPy math and one trace event as the NKI 0.1 front
end) and lands the result in ``dst`` (rule I1).
"""
from __future__ import annotations

import enum
import weakref

import numpy as np

from . import _core as C
from .lnc import make_scheduling_points
from .tensor import NkiTensor, unwrap

_isa = C.core_isa


# ---- enums (T6: raw integers are rejected) ---------------------------------------------------
class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine, sync_engine = engine.gpsimd, engine.unknown, engine.sync


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class matmul_perf_mode(str, enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


def get_nc_version():
    """The interpreter models trn2 (NeuronCore-v3)."""
    return nc_version.gen3


def get_nc_sub_version():
    return 0


class NkiValidationError(ValueError):
    pass


class _Constants:
    """``nki.isa.constants``: the enums again (``from nki.isa import constants`` in nki-library)."""
    engine, reduce_cmd, dge_mode, oob_mode = engine, reduce_cmd, dge_mode, oob_mode
    matmul_perf_mode, nc_version, dma_engine = matmul_perf_mode, nc_version, dma_engine


constants = _Constants()


def _enum(x, cls, api, arg):
    """An enum argument.  MIG (0.2 -> 0.3) says raw integers are rejected, but nki-library (NKI 0.6,
    run on hardware) passes ``dge_mode=3``: an int naming a member is accepted as that member."""
    if x is None or isinstance(x, cls):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        try:
            return cls(int(x))
        except ValueError:
            pass
    raise C.NKISyntaxError("E021", api, arg, f"expected a nki.isa.{cls.__name__} member, got {x!r}",
                         f"Use nisa.{cls.__name__}.<name> ({', '.join(m.name for m in cls)})")


_CORE_ENGINE = {engine.tensor: _isa.engine.tensor, engine.scalar: _isa.engine.scalar,
                engine.gpsimd: _isa.engine.gpsimd, engine.vector: _isa.engine.vector}


def _eng(e, api, *operands):
    if e is engine.unknown or e is None:     # the default: the op core picks the engine
        return None
    e = _enum(e, engine, api, "engine")
    if e == engine.gpsimd:
        for arg, t in operands:
            if isinstance(t, NkiTensor) and t.t.alloc.buffer == "psum":
                raise C.SimTypeError("E007", api, arg, f"GpSimd cannot access PSUM (operand '{arg}' of '{api}')",
                                     "Use the Vector or Scalar engine, or copy the tile to SBUF first")
    return _CORE_ENGINE.get(e)


def _dst(dst, api, buffers=C.ON_CHIP):
    if not isinstance(dst, NkiTensor):
        raise C.SimTypeError("E010", api, "dst", f"expected a destination tensor, got {type(dst).__name__}",
                             "ISA calls take dst first since NKI 0.2: nisa.op(dst, ...) returns nothing")
    if dst.t.alloc.buffer not in buffers:
        raise C.SimTypeError("E007", api, "dst", f"'{api}' writes {'|'.join(buffers)}, got a tensor in "
                             f"'{dst.t.alloc.buffer}'", "Write an SBUF/PSUM tile, then dma_copy it to HBM")
    return dst.t


def _src(x, api, arg, buffers=None):
    """The core tensor of an operand; with ``buffers``, also checked as a tile there (for operands
    the core instruction does not check itself)."""
    if x.__class__ is not NkiTensor:
        raise C.SimTypeError("E010", api, arg, f"expected a tensor, got {type(x).__name__}")
    return x.t if buffers is None else C.check_tile(x.t, api, arg, buffers=buffers)


def _opnd(x):
    """Scalar operand or tile operand (unwrapped)."""
    return x.t if isinstance(x, NkiTensor) else x


def _extra(api, kw, dst=None):
    """Unknown keyword arguments are errors; ``name=`` is accepted, ``dtype=`` must equal dst's."""
    if not kw:
        return
    kw.pop("name", None)
    d = kw.pop("dtype", None)
    if d is not None and dst is not None and C.dt.canonical(d, op=api) != dst.dtype:
        raise C.SimTypeError("E009", api, "dtype", f"dtype={C.dt.name_of(C.dt.canonical(d, op=api))} differs from "
                             f"dst.dtype={C.dt.name_of(dst.dtype)}", "The result is cast to dst.dtype; drop dtype=")
    if kw:
        raise C.SimTypeError("E010", api, next(iter(kw)), f"unexpected keyword argument(s) {sorted(kw)}",
                             "See the nki.isa API reference for this instruction's parameters")


# ---- PSUM write tracking (I3, I4) ------------------------------------------------------------------
# Per PSUM allocation: an int8 array in the storage layout; 0 = never written, 1 = written by a
# matmul/transpose on TensorE, 2 = written by any other instruction (memset, copy, ...).
def _psum_kind(t: C.Tensor) -> np.ndarray:
    ctx = C.current("nc_matmul")
    st = ctx.__dict__.get("_nki07_psum")
    if st is None:   # weak keys: the state must not keep a dead tile's PSUM bank allocated
        st = ctx.__dict__["_nki07_psum"] = weakref.WeakKeyDictionary()
    al = t.alloc
    kinds = st.get(al)
    if kinds is None:
        kinds = st[al] = np.zeros(al.array.size, np.int8)
    isz = al.array.itemsize
    a = t.arr
    return np.lib.stride_tricks.as_strided(kinds[t.off // isz:], a.shape, [s // isz for s in a.strides])


def _mark_psum(t, kind):
    if isinstance(t, NkiTensor):
        t = t.t
    if t.alloc.buffer == "psum" and t.arr is not None:
        _psum_kind(t)[...] = kind


def _land(api, dst: C.Tensor, value: C.Tensor, psum_kind=2):
    C.land(api, dst, value)
    if dst.alloc.buffer == "psum":
        _psum_kind(dst)[...] = psum_kind


# ---- DMA (I5, I6) ----------------------------------------------------------------------------------
def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             **kw):
    api = "dma_copy"
    C.current(api)
    for arg, t in (("dst", dst), ("src", src)):
        if not isinstance(t, NkiTensor):
            raise C.SimTypeError("E010", api, arg, f"expected a tensor, got {type(t).__name__}",
                                 "Call nisa.dma_copy(dst=..., src=...)")
    if "dst_rmw_op" in kw:
        raise C.NKISyntaxError("E021", api, "dst_rmw_op", "dst_rmw_op was removed in NKI 0.3",
                             "Use nisa.dma_compute(dst, [src, dst], reduce_op=nl.add)")
    _extra(api, kw)
    dm = _enum(dge_mode, globals()["dge_mode"], api, "dge_mode")
    _enum(oob_mode, globals()["oob_mode"], api, "oob_mode")
    _enum(engine, globals()["engine"], api, "engine")
    if dm == globals()["dge_mode"].hwdge and dst.dtype != src.dtype:
        raise C.SimTypeError("E009", api, "dst", f"with dge_mode=hwdge src and dst dtypes must match (got "
                             f"{C.dt.name_of(src.dtype)} -> {C.dt.name_of(dst.dtype)})",
                             "Reinterpret with .view(dtype), or use dge_mode.swdge/none to cast")
    for arg, t in (("dst", dst), ("src", src)):
        if t.t.alloc.buffer == "sbuf" and t.t.arr is not None:
            C.check_tile(t.t, api, arg, buffers=("sbuf",), engine_access=False)   # a DMA side
    C.dma_transfer(dst.t, src.t, api="nisa.dma_copy")


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error, **kw):
    api = "dma_transpose"
    C.current(api)
    _extra(api, kw, dst.t if isinstance(dst, NkiTensor) else None)
    if not isinstance(dst, NkiTensor) or not isinstance(src, NkiTensor):
        raise C.SimTypeError("E010", api, "dst", "dma_transpose(dst, src, axes) takes tensors")
    dm = _enum(dge_mode, globals()["dge_mode"], api, "dge_mode")
    if dm not in (None, globals()["dge_mode"].unknown, globals()["dge_mode"].hwdge, globals()["dge_mode"].swdge):
        raise C.NKISyntaxError("E021", api, "dge_mode", f"dge_mode {dm!r} is not valid for dma_transpose",
                              "Use dge_mode.unknown or hwdge")
    nd = src.ndim
    ax = tuple(axes) if axes is not None else {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}.get(nd)
    if ax is None or ax not in ((1, 0), (2, 1, 0), (3, 1, 2, 0)) or len(ax) != nd:
        raise C.SimValueError("E020", api, "axes", f"unsupported permutation {axes} for a rank-{nd} src",
                              "Allowed: (1,0) for 2-D, (2,1,0) for 3-D, (3,1,2,0) for 4-D")
    want = tuple(src.shape[a] for a in ax)
    if tuple(dst.shape) != want:
        raise C.SimValueError("E011", api, "dst", f"dst.shape {dst.shape} must equal the transposed src shape "
                              f"{want} exactly, including rank (NKI 0.4)", "Allocate dst with the permuted shape")
    r = _isa.dma_transpose(src.t, axes=ax, dtype=dst.dtype)
    C.land("nisa.dma_transpose", dst.t, r)


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error, **kw):
    """``dst = reduce_op(srcs[0]*scales[0], srcs[1]*scales[1], ...)`` on the DMA engines."""
    api = "dma_compute"
    ctx = C.current(api)
    _extra(api, kw)
    if not srcs:
        raise C.SimValueError("E011", api, "srcs", "dma_compute needs at least one source")
    name = C.opcode(reduce_op, api, "reduce_op")
    if name not in C.BINARY:
        raise C.NKISyntaxError("E021", api, "reduce_op", f"{name} is not supported in 'dma_compute'")
    fn = C.BINARY[name]
    acc = None
    for i, s in enumerate(srcs):
        v = s.t.read_f32().reshape(dst.shape) if s.size == dst.size else None
        if v is None:
            raise C.SimValueError("E011", api, "srcs", f"srcs[{i}] has {s.size} elements, dst has {dst.size}")
        if scales is not None:
            v = v * np.float32(scales[i])
        acc = v if acc is None else fn(acc, v)
    dst.t.write(acc, api=api)
    C.record_dma(ctx, "nisa.dma_compute", dst.t, srcs[0].t, dst.size, op="dma_compute")


# ---- TensorE (I2-I4, I7) -----------------------------------------------------------------------------
def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, **kw):
    """``dst = stationary.T @ moving`` into PSUM, overwriting or accumulating (rule I3)."""
    api = "nc_matmul"
    ctx = C.current(api)
    d = _dst(dst, api, buffers=("psum",))
    _extra(api, kw)
    if d.dtype != C.dt.float32 and not is_transpose:
        raise C.SimTypeError("E009", api, "dst", f"the nc_matmul destination must be a float32 PSUM tile on trn2, "
                             f"got {C.dt.name_of(d.dtype)}", "Allocate dst with dtype=nl.float32, buffer=nl.psum")
    pm = perf_mode if perf_mode is not None else matmul_perf_mode.none
    if pm == matmul_perf_mode.double_row or pm == "double_row":
        r = _double_row(ctx, api, stationary, moving, tile_position, tile_size)
    elif pm == matmul_perf_mode.none or pm == "none":
        r = _isa.nc_matmul(_src(stationary, api, "stationary"), _src(moving, api, "moving"),
                           is_transpose=is_transpose, tile_position=tile_position or (), tile_size=tile_size or (),
                           _api="nisa.nc_matmul")
    else:
        raise C.NKISyntaxError("E021", api, "perf_mode", f"unknown perf_mode {pm!r}", "Use nisa.matmul_perf_mode.*")
    kind = _psum_kind(d)
    if accumulate is None:
        written = kind != 0
        acc = bool(written.any())
        if acc and not written.all():
            d.write(0.0, np.logical_not(written), api=api)   # the first write to those locations overwrites
    else:
        acc = bool(accumulate)
        written = kind != 0
    if acc:
        if (kind[written] == 2).any() if accumulate is None else (kind == 2).any():
            ctx.warn_once("mm_acc_init", "nc_matmul accumulates onto PSUM initialised by a non-matmul instruction "
                          "(memset/tensor_copy/nl.zeros): undefined behaviour on trn2 hardware (nki.isa.nc_matmul "
                          "note); start the accumulation group with accumulate=False")
        C.land_accumulate(api, d, r)
    else:
        C.land(api, d, r)
    kind[...] = 1


_FP8 = (C.dt.float8_e4m3, C.dt.float8_e5m2)


def _double_row(ctx, api, stationary, moving, tile_position, tile_size):
    """FP8 double-row mode (ISA ``nc_matmul`` "Performance mode"): the contraction runs over the
    partition axis and the first free axis, which must be 2: [K, 2, M] x [K, 2, N] -> [M, N]."""
    st = _src(stationary, api, "stationary", ("sbuf",))
    mv = _src(moving, api, "moving", ("sbuf",))
    for arg, t in (("stationary", st), ("moving", mv)):
        if t.dtype not in _FP8:
            raise C.SimTypeError("E009", api, arg, f"double_row mode takes float8 inputs, got {C.dt.name_of(t.dtype)}",
                                 "Use float8_e4m3 / float8_e5m2 tiles, or perf_mode=none")
        if t.ndim != 3 or t.shape[1] != 2:
            raise C.SimValueError("E003", api, arg, f"double_row operands are [K, 2, free], got {t.shape}")
    if tile_position or tile_size:
        raise C.SimValueError("E003", api, "tile_size", "double_row cannot be combined with PE tiling")
    K, M, N = st.shape[0], st.shape[2], mv.shape[2]
    if mv.shape[0] != K or M > C.hw.GEMM_STATIONARY_FMAX or N > C.hw.GEMM_MOVING_FMAX:
        raise C.SimValueError("E003", api, "moving", f"double_row shapes {st.shape} x {mv.shape}: K must match, "
                              f"M <= {C.hw.GEMM_STATIONARY_FMAX}, N <= {C.hw.GEMM_MOVING_FMAX}")
    r = np.einsum("krm,krn->mn", st.read_f32(), mv.read_f32(), dtype=np.float32) \
        if not ctx.options.trace_only else np.zeros((M, N), np.float32)
    out = C.fresh(np.ascontiguousarray(r), C.dt.float32, "psum", api=api)
    out._event = ctx.record("nc_matmul", "nisa.nc_matmul", C.PE, partitions=K, free_elems=N,
                            in_shapes=[st.shape, mv.shape], out_shape=(M, N),
                            in_dtypes=[C.dt.name_of(st.dtype), C.dt.name_of(mv.dtype)], out_dtype="float32",
                            nbytes=st.size * st.itemsize + mv.size * mv.itemsize + M * N * 4, flops=2 * 2 * K * M * N,
                            reads=[st.region(), mv.region()], writes=[out.region()],
                            meta={"K": 2 * K, "M": M, "N": N, "psum_out": True, "perf_mode": "double_row"})
    return out


def nc_transpose(dst, data, engine=engine.unknown, **kw):
    api = "nc_transpose"
    d = _dst(dst, api)
    _extra(api, kw, d)
    src = _src(data, api, "data", C.ON_CHIP)
    e = _enum(engine, globals()["engine"], api, "engine")
    if e in (None, globals()["engine"].unknown):     # auto: from the destination buffer (RN 0.3 fix)
        e = globals()["engine"].tensor if (d.alloc.buffer == "psum" and src.alloc.buffer == "sbuf") \
            else globals()["engine"].vector
    if d.dtype != src.dtype:
        raise C.SimTypeError("E009", api, "dst", f"dst dtype {C.dt.name_of(d.dtype)} must equal data dtype "
                             f"{C.dt.name_of(src.dtype)}", "Allocate dst with data.dtype")
    r = _isa.nc_transpose(src, engine=_CORE_ENGINE[e], _api="nisa.nc_transpose")
    _land(api, d, r, psum_kind=1 if e == globals()["engine"].tensor else 2)


# ---- Vector / Scalar / GpSimd -------------------------------------------------------------------------
def tensor_copy(dst, src, engine=engine.unknown, **kw):
    api = "tensor_copy"
    d = _dst(dst, api)
    _extra(api, kw, d)
    e = _eng(engine, api, ("src", src), ("dst", dst))
    r = _isa.tensor_copy(_src(src, api, "src"), engine=e, _api="nisa.tensor_copy")
    _land(api, d, r)


def memset(dst, value, engine=engine.unknown, **kw):
    api = "memset"
    d = _dst(dst, api)
    _extra(api, kw, d)
    e = _eng(engine, api, ("dst", dst))
    if C.dt.is_int(d.dtype) and isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise C.SimTypeError("E009", api, "value", f"value {value!r} does not match dst dtype "
                             f"{C.dt.name_of(d.dtype)} (NKI 0.3 strict type matching)", "Pass an integer value")
    if C.dt.is_int(d.dtype) and isinstance(value, (float, np.floating)):
        C.current(api).warn_once("memset_float", f"memset of an integer tile with the float {value!r}: NKI 0.3+ "
                                 "requires an int literal")
    r = _isa.memset(d.shape, value, d.dtype, engine=e)
    _land(api, d, r)


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, **kw):
    api = "tensor_tensor"
    d = _dst(dst, api)
    _extra(api, kw, d)
    e = _eng(engine, api, ("data1", data1), ("data2", data2), ("dst", dst))
    r = _isa.tensor_tensor(_src(data1, api, "data1"), _src(data2, api, "data2"), op, engine=e)
    _land(api, d, r)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, **kw):
    api = "tensor_scalar"
    d = _dst(dst, api)
    _extra(api, kw, d)
    e = _eng(engine, api, ("data", data), ("dst", dst))
    r = _isa.tensor_scalar(_src(data, api, "data"), op0, _opnd(operand0), reverse0, op1, _opnd(operand1), reverse1,
                           engine=e)
    _land(api, d, r)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, **kw):
    api = "scalar_tensor_tensor"
    d = _dst(dst, api)
    _extra(api, kw, d)
    r = _isa.scalar_tensor_tensor(data=_src(data, api, "data"), op0=op0, operand0=_opnd(operand0), op1=op1,
                                  operand1=_src(operand1, api, "operand1"), reverse0=reverse0, reverse1=reverse1)
    _land(api, d, r)


def _trailing_axes(data, axis, api):
    ax = (int(axis),) if isinstance(axis, (int, np.integer)) else tuple(int(a) for a in axis)
    nd = data.ndim
    ax = tuple(sorted(a % nd if a < 0 else a for a in ax))
    if 0 in ax:
        raise C.SimValueError("E023", api, "axis", "the partition axis (0) cannot be reduced",
                              "Transpose first, or use nisa.tensor_partition_reduce")
    if ax != tuple(range(nd - len(ax), nd)):
        raise C.SimValueError("E023", api, "axis", f"reduction axes {ax} must be the last contiguous free axes of a "
                              f"rank-{nd} tile (NKI 0.3 axis handling)", f"e.g. axis={tuple(range(nd - len(ax), nd))}")
    return ax


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, **kw):
    api = "tensor_reduce"
    d = _dst(dst, api)
    _extra(api, kw, d)
    src = _src(data, api, "data", C.ON_CHIP)
    ax = _trailing_axes(data, axis, api)
    r = _isa.tensor_reduce(op, src, ax, negate=negate, keepdims=keepdims)
    _land(api, d, r)


def tensor_partition_reduce(dst, op, data, **kw):
    """Reduce across partitions (GpSimdE): (P, F) -> (1, F)."""
    api = "tensor_partition_reduce"
    ctx = C.current(api)
    d = _dst(dst, api, ("sbuf",))
    _extra(api, kw, d)
    src = _src(data, api, "data", ("sbuf",))
    name = C.opcode(op, api)
    if name not in C.REDUCE:
        raise C.NKISyntaxError("E021", api, "op", f"{name} is not supported in '{api}'")
    v = src.read_f32() if not name.startswith("bitwise") else src.read().astype(np.int64)
    red = np.asarray(C.REDUCE[name](v, axis=0, keepdims=True))
    out = C.fresh(np.ascontiguousarray(red.astype(np.float32) if red.dtype.kind == "f" else red), d.dtype, api=api)
    C.record_compute(ctx, "tensor_partition_reduce", "nisa.tensor_partition_reduce", C.POOL, [src], out, func=name)
    _land(api, d, out)


def _act_regs(ctx, P):
    regs = ctx.__dict__.get("_nki07_act_regs")
    if regs is None:
        regs = ctx.__dict__["_nki07_act_regs"] = np.zeros(C.hw.PMAX, np.float32)
    return regs


def _bias(bias, P, api):
    """A scalar bias (allowed from NeuronCore-v3) becomes a (P, 1) fp32 constant for the core op."""
    if bias is None or isinstance(bias, NkiTensor):
        return unwrap(bias)
    if isinstance(bias, (int, float, np.integer, np.floating)):
        if float(bias) == 0.0:
            return None
        return C.fresh(np.full((P, 1), np.float32(bias)), C.dt.float32, api=api)
    raise C.SimTypeError("E010", api, "bias", f"bias must be a scalar or a (P, 1) tile, got {type(bias).__name__}")


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               **kw):
    """``dst = op(data * scale + bias)`` on ScalarE, with the ``reduce_regs`` accumulator."""
    api = "activation"
    ctx = C.current(api)
    d = _dst(dst, api)
    _extra(api, kw, d)
    cmd = _enum(reduce_cmd, globals()["reduce_cmd"], api, "reduce_cmd")
    src = _src(data, api, "data", C.ON_CHIP)
    P = src.shape[0]
    r = _isa.activation(op, src, bias=_bias(bias, P, api), scale=_opnd(scale), dtype=d.dtype)
    ev = r._event
    if reduce_res is not None or cmd not in (None, globals()["reduce_cmd"].idle):
        if reduce_op is not None and C.opcode(reduce_op, api, "reduce_op") != "add":
            raise C.NKISyntaxError("E021", api, "reduce_op", "activation's reduce_op must be nl.add")
        regs = _act_regs(ctx, P)
        RC = globals()["reduce_cmd"]
        if cmd in (RC.reset, RC.reset_reduce):
            regs[:P] = 0
        if cmd in (RC.reduce, RC.reset_reduce):
            regs[:P] += np.asarray(r._exact, np.float32).reshape(P, -1).sum(axis=1)
        if cmd == RC.load_reduce:
            raise C.not_implemented("nisa.activation(reduce_cmd=load_reduce)")
        if reduce_res is not None:
            rr = _src(reduce_res, api, "reduce_res", C.ON_CHIP)
            if rr.shape[0] != P or C.free_size(rr.shape) != 1:
                raise C.SimValueError("E011", api, "reduce_res", f"reduce_res must be ({P}, 1), got {rr.shape}")
            rr.write(regs[:P].reshape(rr.shape), api=api)
            if ev is not None:
                ev.writes.append(rr.region())
                ev.meta["reduce"] = True
    _land(api, d, r)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, **kw):
    api = "activation_reduce"
    d = _dst(dst, api)
    _extra(api, kw, d)
    src = _src(data, api, "data", C.ON_CHIP)
    r = _isa.activation_reduce(op, src, reduce_op=reduce_op, reduce_res=_src(reduce_res, api, "reduce_res"),
                               bias=_bias(bias, src.shape[0], api), scale=_opnd(scale), dtype=d.dtype)
    _land(api, d, r)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, **kw):
    api = "tensor_scalar_reduce"
    d = _dst(dst, api)
    _extra(api, kw, d)
    cmd = _enum(reduce_cmd, globals()["reduce_cmd"], api, "reduce_cmd")
    if reduce_res is None or cmd != globals()["reduce_cmd"].reset_reduce or reduce_init is not None \
            or reduce_res_negate:
        raise C.not_implemented("nisa.tensor_scalar_reduce with the VectorE accumulator (reduce_res=None, "
                                "reduce_cmd other than reset_reduce, reduce_init, reduce_res_negate)")
    r = _isa.tensor_scalar_reduce(data=_src(data, api, "data"), op0=op0, operand0=_opnd(operand0),
                                  reduce_op=reduce_op, reduce_res=_src(reduce_res, api, "reduce_res"),
                                  reverse0=reverse0, dtype=d.dtype)
    _land(api, d, r)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, **kw):
    api = "tensor_tensor_scan"
    d = _dst(dst, api)
    _extra(api, kw, d)
    r = _isa.tensor_tensor_scan(_src(data0, api, "data0"), _src(data1, api, "data1"), _opnd(initial), op0, op1,
                                reverse0, reverse1, dtype=d.dtype)
    _land(api, d, r)


def reciprocal(dst, data, **kw):
    api = "reciprocal"
    d = _dst(dst, api)
    _extra(api, kw, d)
    _land(api, d, _isa.reciprocal(_src(data, api, "data"), dtype=d.dtype))


def bn_stats(dst, data, **kw):
    api = "bn_stats"
    d = _dst(dst, api)
    _extra(api, kw, d)
    _land(api, d, _isa.bn_stats(_src(data, api, "data"), dtype=d.dtype))


def bn_aggr(dst, data, **kw):
    api = "bn_aggr"
    d = _dst(dst, api)
    _extra(api, kw, d)
    _land(api, d, _isa.bn_aggr(_src(data, api, "data"), dtype=d.dtype))


def max8(dst, src, **kw):
    api = "max8"
    d = _dst(dst, api)
    _extra(api, kw, d)
    _land(api, d, _isa.max8(src=_src(src, api, "src"), dtype=d.dtype))


def _affine(api, P, pattern, offset, channel_multiplier):
    pat = [(int(s), int(n)) for s, n in pattern]
    if len(pat) > 4:
        raise C.SimValueError("E011", api, "pattern", f"at most 4 [step, num] pairs, got {len(pat)}")
    shape = (P,) + tuple(n for _, n in pat)
    v = np.full(shape, int(offset), dtype=np.int64)
    v += (np.arange(P, dtype=np.int64) * int(channel_multiplier)).reshape((P,) + (1,) * len(pat))
    for ax, (s, n) in enumerate(pat, start=1):
        sh = [1] * len(shape)
        sh[ax] = n
        v += (np.arange(n, dtype=np.int64) * s).reshape(sh)
    return v.astype(np.int32).astype(np.int64)


def _check_count(api, arg, n, tile_shape):
    if n != C.free_size(tile_shape):
        raise C.SimValueError("E011", api, arg, f"the pattern has {n} elements per partition, the tile "
                              f"{tuple(tile_shape)} has {C.free_size(tile_shape)}",
                              "The pattern's element count must match the tile's free size")


def iota(dst, pattern, offset=0, channel_multiplier=0, **kw):
    """``dst[p, ...] = offset + p*channel_multiplier + sum(i_k * step_k)`` (int32) on GpSimdE (I11)."""
    api = "iota"
    ctx = C.current(api)
    d = _dst(dst, api, ("sbuf",))
    _extra(api, kw, d)
    P = d.shape[0]
    v = _affine(api, P, pattern, offset, channel_multiplier)
    _check_count(api, "pattern", C.free_size(v.shape), d.shape)
    vals = v.reshape(d.shape)
    out = C.fresh(vals.astype(np.float32) if C.dt.is_float(d.dtype) else vals, d.dtype, api=api)
    C.record_compute(ctx, "iota", "nisa.iota", C.POOL, [], out, func="iota")
    _land(api, d, out)


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0, **kw):
    """``dst = cmp_op(affine_value, 0) ? on_true_tile : on_false_value`` on GpSimdE (I12)."""
    api = "affine_select"
    ctx = C.current(api)
    d = _dst(dst, api, ("sbuf",))
    _extra(api, kw, d)
    src = _src(on_true_tile, api, "on_true_tile", ("sbuf",))
    C.same_partitions(api, dst=d, on_true_tile=src)
    cmp = "equal" if cmp_op is None else C.opcode(cmp_op, api, "cmp_op")
    if cmp not in C.BINARY:
        raise C.NKISyntaxError("E021", api, "cmp_op", f"{cmp} is not a comparison op")
    v = _affine(api, d.shape[0], pattern, offset, channel_multiplier)
    _check_count(api, "pattern", C.free_size(v.shape), src.shape)
    pred = C.BINARY[cmp](v, 0).reshape(src.shape)
    r = np.where(pred, src.read_f32(), np.float32(on_false_value)).astype(np.float32)
    out = C.fresh(r, d.dtype, api=api)
    C.record_compute(ctx, "affine_select", "nisa.affine_select", C.POOL, [src], out, func="select")
    _land(api, d, out)


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, **kw):
    """``dst = predicate ? src : dst`` (elements where the predicate is non-zero) on VectorE."""
    api = "tensor_copy_predicated"
    ctx = C.current(api)
    d = _dst(dst, api)
    _extra(api, kw, d)
    p = _src(predicate, api, "predicate", C.ON_CHIP)
    pv = np.asarray(p.read()).reshape(d.shape) != 0
    if reverse_pred:
        pv = ~pv
    if isinstance(src, NkiTensor):
        s = _src(src, api, "src", C.ON_CHIP)
        sv = s.read_f32().reshape(d.shape)
        ins = [s, p, d]
    else:
        sv, ins = np.float32(src), [p, d]
    r = np.where(pv, sv, d.read_f32()).astype(np.float32)
    d.write(r, api=api)
    C.record_compute(ctx, "tensor_copy_predicated", "nisa.tensor_copy_predicated", C.DVE, ins, d, func="select")


def _per_partition(t, api, arg, lo=8, hi=16384):
    v = t.read_f32().reshape(t.shape[0], -1)
    if not lo <= v.shape[1] <= hi:
        raise C.SimValueError("E011", api, arg, f"{arg} must have {lo}..{hi} elements per partition, got {v.shape[1]}",
                              got=v.shape[1], limit=f"{lo}..{hi}")
    return v


def _match8(data, vals, order):
    """Per partition, the position of the first not-yet-paired occurrence of each value, visiting the
    8 values in ``order`` (-1 where absent)."""
    P, F = data.shape
    used = np.zeros((P, F), bool)
    idx = np.full((P, 8), -1, np.int64)
    rows = np.arange(P)
    for j in order:
        hit = (data == vals[:, j:j + 1]) & ~used
        first = hit.argmax(axis=1)
        found = hit[rows, first]
        idx[found, j] = first[found]
        used[rows[found], first[found]] = True
    return idx


def nc_find_index8(dst, data, vals, **kw):
    """Index of the first occurrence of each of 8 values per partition; duplicates advance through
    successive occurrences; absent -> all ones (ISA ``nc_find_index8``; RN 0.6 simulator fixes)."""
    api = "nc_find_index8"
    ctx = C.current(api)
    d = _dst(dst, api)
    _extra(api, kw, d)
    src = _src(data, api, "data", C.ON_CHIP)
    vv = _src(vals, api, "vals", C.ON_CHIP)
    x = _per_partition(src, api, "data")
    v = _per_partition(vv, api, "vals", 8, 8)
    if d.dtype not in (C.dt.uint32, C.dt.uint16):
        raise C.SimTypeError("E009", api, "dst", f"dst must be uint32 or uint16, got {C.dt.name_of(d.dtype)}")
    idx = _match8(x, v, range(8))
    idx[idx < 0] = np.iinfo(d.dtype).max
    out = C.fresh(idx.reshape(d.shape), d.dtype, api=api)
    C.record_compute(ctx, "nc_find_index8", "nisa.nc_find_index8", C.DVE, [src, vv], out, func="find_index8")
    _land(api, d, out)


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, **kw):
    """Replace the first occurrence of each of 8 values per partition with ``imm`` (values visited in
    reverse order, ISA ``nc_match_replace8``); their positions go to ``dst_idx`` if given."""
    api = "nc_match_replace8"
    ctx = C.current(api)
    d = _dst(dst, api)
    _extra(api, kw, d)
    src = _src(data, api, "data", C.ON_CHIP)
    vv = _src(vals, api, "vals", C.ON_CHIP)
    x = _per_partition(src, api, "data")
    idx = _match8(x, _per_partition(vv, api, "vals", 8, 8), range(7, -1, -1))
    r = x.copy()
    rows = np.repeat(np.arange(x.shape[0])[:, None], 8, axis=1)
    ok = idx >= 0
    r[rows[ok], idx[ok]] = np.float32(imm)
    out = C.fresh(r.reshape(src.shape), d.dtype, api=api)
    ev = C.record_compute(ctx, "nc_match_replace8", "nisa.nc_match_replace8", C.DVE, [src, vv], out, func="match8")
    if dst_idx is not None:
        di = _src(dst_idx, api, "dst_idx", C.ON_CHIP)
        di.write(np.where(ok, idx, np.iinfo(np.uint32).max).reshape(di.shape), api=api)
        if ev is not None:
            ev.writes.append(di.region())
    _land(api, d, out)


def nc_stream_shuffle(dst, src, shuffle_mask, **kw):
    """Cross-partition move within each 32-partition quadrant: ``dst[q*32+i] = src[q*32+mask[i]]``;
    mask value 255 leaves the destination partition unmodified (ISA ``nc_stream_shuffle``)."""
    api = "nc_stream_shuffle"
    ctx = C.current(api)
    d = _dst(dst, api)
    _extra(api, kw, d)
    s = _src(src, api, "src", C.ON_CHIP)
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != 32 or any(not (0 <= m < 32 or m == 255) for m in mask):
        raise C.SimValueError("E011", api, "shuffle_mask", "shuffle_mask must be 32 ints in 0..31 or 255")
    if d.dtype != s.dtype or C.free_size(d.shape) != C.free_size(s.shape):
        raise C.SimValueError("E011", api, "dst", "dst must have src's dtype and elements per partition")
    sv = s.read_f32().reshape(s.shape[0], -1)
    Pd = d.shape[0]
    keep = [p for p in range(Pd) if mask[p % 32] == 255]
    r = np.zeros((Pd, sv.shape[1]), np.float32)
    if keep:
        r[keep] = d.read_f32().reshape(Pd, -1)[keep]
    for p in range(Pd):
        m = mask[p % 32]
        if m != 255:
            q = (p // 32) * 32 + m
            if q >= sv.shape[0]:
                raise C.SimIndexError("E008", api, "shuffle_mask", f"partition {p} reads src partition {q}, src has "
                                      f"{sv.shape[0]}")
            r[p] = sv[q]
    out = C.fresh(r.reshape(d.shape), d.dtype, api=api)
    C.record_compute(ctx, "nc_stream_shuffle", "nisa.nc_stream_shuffle", C.DVE, [s], out, func="shuffle")
    _land(api, d, out)


_FP32_MIN = float(np.finfo(np.float32).min)


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=None, range_start=0, on_false_value=_FP32_MIN, **kw):
    """``dst = (cmp0(i, bound0) & cmp1(i, bound1)) ? on_true_tile : on_false_value`` with i =
    range_start + the free index, and a free-axis reduce into ``reduce_res`` (ISA ``range_select``,
    its NumPy equivalent).  Only reset_reduce is modelled for the accumulator."""
    api = "range_select"
    ctx = C.current(api)
    d = _dst(dst, api)
    _extra(api, kw, d)
    src = _src(on_true_tile, api, "on_true_tile", C.ON_CHIP)
    P = src.shape[0]
    names = [C.opcode(o, api, a) for o, a in ((comp_op0, "comp_op0"), (comp_op1, "comp_op1"))]
    for n in names:
        if n not in ("equal", "less", "less_equal", "greater", "greater_equal"):
            raise C.NKISyntaxError("E021", api, "comp_op0", f"{n} is not a range_select comparison")
    b0 = _src(bound0, api, "bound0", C.ON_CHIP).read_f32().reshape(P, 1)
    b1 = _src(bound1, api, "bound1", C.ON_CHIP).read_f32().reshape(P, 1)
    x = src.read_f32().reshape(P, -1)
    idx = (np.float32(range_start) + np.arange(x.shape[1], dtype=np.float32))[None, :]
    m = C.BINARY[names[0]](idx, b0) & C.BINARY[names[1]](idx, b1)
    r = np.where(m, x, np.float32(on_false_value)).astype(np.float32)
    out = C.fresh(r.reshape(src.shape), d.dtype, api=api)
    ev = C.record_compute(ctx, "range_select", "nisa.range_select", C.DVE, [src], out, func="select")
    if reduce_res is not None:
        cmd = _enum(reduce_cmd, globals()["reduce_cmd"], api, "reduce_cmd")
        if cmd != globals()["reduce_cmd"].reset_reduce:
            raise C.not_implemented(f"nisa.range_select(reduce_cmd={cmd!r})")
        rn = "maximum" if reduce_op is None else C.opcode(reduce_op, api, "reduce_op")
        if rn not in C.REDUCE:
            raise C.NKISyntaxError("E021", api, "reduce_op", f"{rn} is not a reduce op")
        rr = _src(reduce_res, api, "reduce_res", C.ON_CHIP)
        rr.write(np.asarray(C.REDUCE[rn](r, axis=1)).reshape(rr.shape), api=api)
        if ev is not None:
            ev.writes.append(rr.region())
    _land(api, d, out)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, **kw):
    """Per GpSimd core (partitions 0, 16, ..., 112 only): the indices (+ index_offset) of the non-zero
    elements, padding_val, and the count in the last slot; other partitions of dst are untouched
    (ISA ``nonzero_with_count``)."""
    api = "nonzero_with_count"
    ctx = C.current(api)
    d = _dst(dst, api, ("sbuf",))
    _extra(api, kw, d)
    s = _src(src, api, "src", ("sbuf",))
    if s.dtype not in (C.dt.float32, C.dt.int32) or d.dtype != C.dt.int32:
        raise C.SimTypeError("E009", api, "dst", "src must be float32/int32 and dst int32")
    P, T = s.shape[0], C.free_size(s.shape)
    if d.shape[0] != P or C.free_size(d.shape) != T + 1:
        raise C.SimValueError("E011", api, "dst", f"dst must be ({P}, {T + 1}) for src {s.shape}")
    rows = list(range(0, P, 16))
    x = np.asarray(s.read()).reshape(P, T)[rows]
    r = np.full((len(rows), T + 1), int(padding_val), np.int64)
    for k, row in enumerate(x):
        nz = np.flatnonzero(row)
        r[k, :nz.size] = nz + int(index_offset)
        r[k, T] = nz.size
    view = d.arr.reshape(P, T + 1)
    for k, p in enumerate(rows):
        view[p] = r[k]
    d.alloc.written = True
    d.alloc.version += 1
    C.record_compute(ctx, "nonzero_with_count", "nisa.nonzero_with_count", C.POOL, [s], d, func="nonzero")


# ---- registers and runtime control flow (C5) -----------------------------------------------------
class VirtualRegister:
    """A 32-bit engine register; in the interpreter it holds a Python int."""
    __nki_register__ = True
    __slots__ = ("value",)

    def __init__(self, x=0):
        self.value = int(x)

    def __int__(self):
        return self.value

    __index__ = __int__

    def __bool__(self):
        return self.value != 0

    def __repr__(self):
        return f"VirtualRegister({self.value})"

    def _v(self, o):
        return int(o) if isinstance(o, VirtualRegister) else o

    __add__ = lambda s, o: s.value + s._v(o)
    __radd__ = lambda s, o: s._v(o) + s.value
    __sub__ = lambda s, o: s.value - s._v(o)
    __rsub__ = lambda s, o: s._v(o) - s.value
    __mul__ = lambda s, o: s.value * s._v(o)
    __rmul__ = lambda s, o: s._v(o) * s.value
    __floordiv__ = lambda s, o: s.value // s._v(o)
    __mod__ = lambda s, o: s.value % s._v(o)
    __lt__ = lambda s, o: s.value < s._v(o)
    __le__ = lambda s, o: s.value <= s._v(o)
    __gt__ = lambda s, o: s.value > s._v(o)
    __ge__ = lambda s, o: s.value >= s._v(o)
    __eq__ = lambda s, o: s.value == s._v(o)
    __ne__ = lambda s, o: s.value != s._v(o)
    __hash__ = lambda s: hash(s.value)


def register_alloc(x=None):
    return VirtualRegister(0 if x is None else x)


def register_move(dst, src):
    dst.value = int(src)


def register_load(dst, src):
    if not isinstance(src, NkiTensor) or src.size != 1:
        raise C.SimValueError("E011", "register_load", "src", "register_load reads a single-element SBUF tensor")
    dst.value = int(np.asarray(src.t.read()).reshape(-1)[0])


def register_store(dst, src):
    if not isinstance(dst, NkiTensor) or dst.size != 1:
        raise C.SimValueError("E011", "register_store", "dst", "register_store writes a single-element SBUF tensor")
    dst.t.write(np.full(dst.shape, int(src)), api="register_store")


def core_barrier(data, cores, engine=engine.gpsimd, **kw):
    """Synchronise the logical cores; instances run serially in the interpreter, so a no-op."""
    return None


# every NKI call is a scheduling point of an LNC launch (lnc.py)
make_scheduling_points(globals(), __name__, skip=['get_nc_sub_version', 'get_nc_version', 'register_alloc', 'register_load', 'register_move', 'register_store'])
__getattr__ = C.module_getattr("nki.isa")
