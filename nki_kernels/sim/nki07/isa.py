"""``nki.isa`` (NKI 0.6/0.7): ``dst``-first instructions that return nothing, one line per instruction
over the op core (docs/nki-0.7-spec.md §4).

``grep -n "^NAME = " nki_kernels/sim/nki07/isa.py`` finds an instruction's adapter; the core op it
names holds the semantics and their sources; ``spec="0.6"`` selects the NKI 0.6 reading where the
documented semantics changed since SDK 2.26.
"""

from __future__ import annotations

import typing as _typing

import numpy as np

from ..core import dma as _dma
from ..core import indirect as _indirect
from ..core import reduce as _reduce
from ..core import scalar as _scalar
from ..core import select as _select
from ..core import tensore as _tensore
from ..core import topk as _topk
from ..core import vector as _vector
from ..core.context import current, enter, lenient
from ..core.dtypes import is_int, name_of
from ..core.enums import (  # noqa: F401
    constants,
    dge_mode,
    dma_engine,
    engine,
    get_nc_version,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from ..core.errors import NKISyntaxError, SimTypeError, SimValueError
from ..core.ops import BINARY, free_size, opcode, same_partitions, tile
from ..core.tensor import SBUF
from . import frontend
from .adapt import dst_first, module_getattr, unwrap
from .p2p import sendrecv  # noqa: F401  (nki.isa.sendrecv, rules X1-X2)
from .scalar import NkiScalar, traced_use, value_of
from .tensor import NkiTensor

if _typing.TYPE_CHECKING:  # not at run time: nki.isa's public names are the NKI API's
    from typing import Any, SupportsInt

tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine, sync_engine = engine.gpsimd, engine.unknown, engine.sync


def get_nc_sub_version() -> int:
    return 0


class NkiValidationError(ValueError):
    pass


# ---- argument conversions where the 0.7 signature differs from the core op's ------------------


def _dma_copy(dst, src, *args, **kw):
    """``dma_copy(dst, src, priority, oob_mode, dge_mode, engine)``; ``dst_rmw_op`` was removed (I5)."""
    if "dst_rmw_op" in kw:
        raise NKISyntaxError(
            "E021",
            "dma_copy",
            "dst_rmw_op",
            "dst_rmw_op was removed in NKI 0.3",
            "Use nisa.dma_compute(dst, [src, dst], reduce_op=nl.add)",
        )
    kw.update(zip(("priority", "oob_mode", "dge_mode", "engine"), args, strict=False))
    return (src,), kw


def _memset(dst, value, engine=None, **kw):
    """I10: ``value`` must match the dtype (NKI 0.3 MIG "nisa.memset -- strict type matching")."""
    if is_int(dst.dtype) and isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise SimTypeError(
                "E009",
                "memset",
                "value",
                f"value {value!r} does not match dst dtype {name_of(dst.dtype)} (NKI 0.3 strict type matching)",
                "Pass an integer value",
            )
        current("memset").warn_once(
            "memset_float", f"memset of an integer tile with the float {value!r}: NKI 0.3+ requires an int literal"
        )
    return (value,), dict(kw, engine=engine)


def _pattern_values(api, P, pattern, offset, channel_multiplier):
    """``offset + p*channel_multiplier + sum(i_k * step_k)`` over ``pattern`` = [[step, num], ...]
    (int32 math; NKI 0.6 isa iota / affine_select)."""
    pat = [(int(s), int(n)) for s, n in pattern]
    if len(pat) > 4:
        raise SimValueError("E011", api, "pattern", f"at most 4 [step, num] pairs, got {len(pat)}")
    shape = (P,) + tuple(n for _, n in pat)
    v = np.full(shape, int(offset), dtype=np.int64)
    v += (np.arange(P, dtype=np.int64) * int(channel_multiplier)).reshape((P,) + (1,) * len(pat))
    for ax, (s, n) in enumerate(pat, start=1):
        sh = [1] * len(shape)
        sh[ax] = n
        v += (np.arange(n, dtype=np.int64) * s).reshape(sh)
    return v.astype(np.int32).astype(np.int64)


def _iota(dst, pattern, offset=0, channel_multiplier=0, **kw):
    """I11: ``iota(dst, pattern, offset=0, channel_multiplier=0)``."""
    return (_pattern_values("iota", dst.shape[0], pattern, offset, channel_multiplier),), kw


def _affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0, **kw):
    """I12: predicate ``cmp_op(affine_value, 0)`` over ``pattern`` (default equal); SBUF only."""
    api = "affine_select"
    tile(dst, api, "dst", buffers=(SBUF,))
    tile(on_true_tile, api, "on_true_tile", buffers=(SBUF,))
    same_partitions(api, dst=dst, on_true_tile=on_true_tile)
    cmp = "equal" if cmp_op is None else opcode(cmp_op, api, "cmp_op")
    if cmp not in BINARY:
        raise NKISyntaxError("E021", api, "cmp_op", f"{cmp} is not a comparison op")
    v = _pattern_values(api, dst.shape[0], pattern, offset, channel_multiplier)
    if free_size(v.shape) != free_size(on_true_tile.shape):
        raise SimValueError(
            "E011",
            api,
            "pattern",
            f"the pattern has {free_size(v.shape)} elements per partition, "
            f"the tile {tuple(on_true_tile.shape)} has {free_size(on_true_tile.shape)}",
            "The pattern's element count must match the tile's free size",
        )
    pred = BINARY[cmp](v, 0).reshape(on_true_tile.shape)
    return (pred, on_true_tile, on_false_value), kw


def _activation_bias(dst, op, data, bias=None, scale=1.0, *args, **kw):
    if bias is not None and not isinstance(bias, (int, float, np.integer, np.floating)) and not hasattr(bias, "alloc"):
        raise SimTypeError(
            "E010", "activation", "bias", f"bias must be a scalar or a (P, 1) tile, got {type(bias).__name__}"
        )
    return (op, data, bias, scale) + args, kw


# ---- DMA (I5, I6) ----------------------------------------------------------------------------
dma_copy = dst_first(
    _dma.dma_copy, convert=_dma_copy, extra=("priority", "oob_mode", "dge_mode", "engine", "dst_rmw_op")
)
dma_transpose = dst_first(_dma.dma_transpose, spec="0.6")
dma_compute = dst_first(_dma.dma_compute)

# ---- TensorE (I2-I4, I7, I14) ------------------------------------------------------------------
nc_matmul = dst_first(_tensore.nc_matmul, warn_non_matmul_init=True, spec="0.6")
nc_transpose = dst_first(_tensore.nc_transpose, spec="0.6")

# ---- Vector / Scalar / GpSimd -------------------------------------------------------------------
tensor_copy = dst_first(_vector.tensor_copy)
memset = dst_first(_vector.memset, convert=_memset, extra=("engine",))
tensor_tensor = dst_first(_vector.tensor_tensor)
tensor_scalar = dst_first(_vector.tensor_scalar)
scalar_tensor_tensor = dst_first(_vector.scalar_tensor_tensor)
tensor_reduce = dst_first(_reduce.tensor_reduce, spec="0.6")
tensor_partition_reduce = dst_first(_reduce.tensor_partition_reduce)
activation = dst_first(_vector.activation, convert=_activation_bias, defaults={"reduce_cmd": reduce_cmd.idle})
activation_reduce = dst_first(_vector.activation_reduce)
tensor_scalar_reduce = dst_first(_vector.tensor_scalar_reduce)
tensor_tensor_scan = dst_first(_vector.tensor_tensor_scan)
reciprocal = dst_first(_vector.reciprocal)
bn_stats = dst_first(_reduce.bn_stats)
bn_aggr = dst_first(_reduce.bn_aggr)
max8 = dst_first(_reduce.max8)
iota = dst_first(_vector.iota, convert=_iota, extra=("pattern", "offset", "channel_multiplier"))
affine_select = dst_first(
    _vector.affine_select, convert=_affine_select, extra=("pattern", "channel_multiplier", "cmp_op", "offset")
)
tensor_copy_predicated = dst_first(_select.tensor_copy_predicated)
nc_find_index8 = dst_first(_select.nc_find_index8, spec="0.6")
nc_match_replace8 = dst_first(_select.nc_match_replace8, spec="0.6")
nc_stream_shuffle = dst_first(_select.nc_stream_shuffle)
range_select = dst_first(_select.range_select, defaults={"reduce_cmd": reduce_cmd.reset_reduce})
nonzero_with_count = dst_first(_select.nonzero_with_count)
nc_n_gather = dst_first(_indirect.nc_n_gather)
# local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None) (NKI 0.6 isa docstring):
# the 0.1 instruction with a destination
local_gather = dst_first(_indirect.local_gather)
# I20: topk(val_dst, idx_dst, src, n, sorted=False) -- GpSimdE, per 16-partition group (SDK 2.33 page)
topk = dst_first(_topk.topk, dst_name="val_dst")


# ---- registers and runtime control flow (C5) -----------------------------------------------------
class VirtualRegister:
    """A 32-bit engine register; in the interpreter it holds a Python int (``.value``).

    C6 (SDK 2.32 ``nki.isa.VirtualRegister`` note; NKI 0.7 specializes by tracing, RN 0.7.0): while a kernel
    is traced a register has no value, so ``bool()`` (an ``if`` / ``while reg:``), ``int()`` and ``range()``
    of a register raise (E015, a TypeError); ``NKI_COMPILER_FRONTEND=custom`` keeps the 0.6 parser, where
    they read the value."""

    __nki_register__ = True
    __slots__ = ("value",)

    def __init__(self, x: SupportsInt = 0):
        self.value = value_of(x, "register_alloc")

    def _concrete(self, what: str) -> int:
        if not frontend.custom():
            raise traced_use(
                f"{what} of the register {self!r}",
                "VirtualRegister",
                "Use nl.fori_loop(lower, upper, body) / nl.while_loop(reg, body) for loops on the device "
                "(NKI 0.7 removed `while reg:` and nl.dynamic_range)",
            )
        return self.value

    def __int__(self) -> int:
        return self._concrete("int()")

    def __index__(self) -> int:
        return self._concrete("a Python index / range() bound")

    def __bool__(self) -> bool:
        return self._concrete("bool() (an `if` / `while reg:`)") != 0

    def __repr__(self) -> str:
        return f"VirtualRegister({self.value})"

    def _v(self, o):
        return o.value if isinstance(o, VirtualRegister) else o

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

    # object defines these three: a lambda would be typed as object's (``s`` an object)
    def __eq__(self, o: object) -> Any:
        return self.value == self._v(o)

    def __ne__(self, o: object) -> Any:
        return self.value != self._v(o)

    def __hash__(self) -> int:
        return hash(self.value)


class LoopRegister(VirtualRegister):
    """The induction variable of ``nl.dynamic_range`` (``frozen``: read-only, LG "Runtime control flow"; MIG
    0.5->0.6 "Rules for migrated loops") or of a ``fori_loop`` bounded by a register (passed by value: writing
    it "has no effect on the loop", SDK 2.33.0 ``nki.language.fori_loop``)."""

    __slots__ = ("frozen",)

    def __init__(self, x: SupportsInt = 0, frozen: bool = True):
        super().__init__(x)
        self.frozen = frozen


def _register(dst, api):
    if not isinstance(dst, VirtualRegister):
        raise SimTypeError(
            "E010",
            api,
            "dst",
            f"dst must be a register from nisa.register_alloc(), got {type(dst).__name__}"
            + (" (the NkiScalar a fori_loop with int bounds passes its body)" if isinstance(dst, NkiScalar) else ""),
            "Allocate a register: r = nisa.register_alloc()",
        )


def _writable(dst, api):
    _register(dst, api)
    if not isinstance(dst, LoopRegister):
        return
    what = (
        f"the register {dst!r} is the induction variable of a fori_loop / dynamic_range loop: it is read-only "
        "(frozen), writing it would change the loop's termination"
    )
    fix = "Allocate a register of your own (nisa.register_alloc) and move the loop variable into it"
    if dst.frozen or frontend.custom():
        raise SimValueError("E015", api, "dst", what, fix)
    # SDK 2.33.0 fori_loop: "writing to i has no effect on the loop"; the 0.6 migration rule still says the
    # variable is read-only: a SimWarning, E015 under strict
    current(api)
    what = f"{api} writes the fori_loop variable {dst!r}: it is passed by value, so the write has no effect on the loop"
    lenient("nki07.fori_variable_write", what, fix, op=api, arg="dst")


def register_alloc(x: SupportsInt | None = None) -> VirtualRegister:
    return VirtualRegister(0 if x is None else x)


def register_move(dst: VirtualRegister, src: SupportsInt) -> None:
    _writable(dst, "register_move")
    dst.value = value_of(src, "register_move")


def register_load(dst: VirtualRegister, src: NkiTensor) -> None:
    _writable(dst, "register_load")
    if not isinstance(src, NkiTensor) or src.size != 1:
        raise SimValueError("E011", "register_load", "src", "register_load reads a single-element SBUF tensor")
    dst.value = int(np.asarray(src.t.read()).reshape(-1)[0])


def register_store(dst: NkiTensor, src: SupportsInt) -> None:
    if not isinstance(dst, NkiTensor) or dst.size != 1:
        raise SimValueError("E011", "register_store", "dst", "register_store writes a single-element SBUF tensor")
    dst.t.write(np.full(dst.shape, value_of(src, "register_store")), api="register_store")


# ---- NkiScalar (S1-S6, SDK 2.33) ------------------------------------------------------------------
def _tracer_only(api: str) -> None:
    # scalar_load / scalar_store pages: "Only the tracer frontend supports this. The parser frontend rejects
    # the call." (NKI_COMPILER_FRONTEND=custom selects the parser)
    if frontend.custom():
        raise NKISyntaxError(
            "E021",
            api,
            None,
            f"nisa.{api} needs NKI 0.7's tracing specialization; NKI_COMPILER_FRONTEND=custom selects the "
            "previous (parser) specialization, which rejects the call",
            "Unset NKI_COMPILER_FRONTEND",
        )


def scalar_load(src: NkiTensor, name: str | None = None) -> NkiScalar:
    """S2: the integer of a 1x1 nl.int32 / nl.int64 tensor in SBUF or HBM, as an NkiScalar of its dtype."""
    ctx = enter("scalar_load")
    _tracer_only("scalar_load")
    value, dtype = _scalar.scalar_load(ctx, unwrap(src), api="nisa.scalar_load")
    return NkiScalar(value, dtype)


def scalar_store(dst: NkiTensor, value: NkiScalar, name: str | None = None) -> None:
    """S3: write an NkiScalar into a 1x1 tensor of its width (a Python int is rejected: use nisa.memset)."""
    ctx = enter("scalar_store")
    _tracer_only("scalar_store")
    if not isinstance(value, NkiScalar):
        raise SimTypeError(
            "E010",
            "scalar_store",
            "value",
            f"value must be an NkiScalar, got {type(value).__name__}: a Python int stores nothing on the "
            "device (scalar_store page)",
            "Write a compile-time constant with nisa.memset(dst, value)",
        )
    _scalar.scalar_store(ctx, unwrap(dst), value.usable("scalar_store"), value.dtype, api="nisa.scalar_store")


def core_barrier(data: NkiTensor, cores: Any, engine: engine = engine.gpsimd, **kw: Any) -> None:
    """Synchronise the logical cores: the instances of an LNC launch run in lockstep (lnc.py), so a
    scheduling point and nothing else."""
    enter("core_barrier", instruction=False)


__getattr__ = module_getattr("nki.isa")
