"""The op core's machinery: the op table, ALU op tables, operand checks, and how a result lands.

Ops are destination-passing functions ``op(ctx, dst, *operands, **options)`` registered in
:data:`OPS` (``@op``).  Each validates every operand before touching state, computes with one
vectorised NumPy call, and hands its result to :func:`emit` as a :class:`Result`:

* ``dst`` a tensor: the result lands there (rounded once to ``dst``'s dtype, under the instruction's
  mask) and one final event is recorded with ``dst`` as its write region;
* ``dst`` is ``None``: a new tile holds the result and the event is recorded now;
* ``dst`` is :data:`PENDING` (a value-returning call of a front end): a new tile holds the result,
  the instruction's place in the trace is reserved, and its event waits for its destination
  (``RunContext.pending``, ``Alloc.pending``) -- an assignment ``t[...] = r`` or ``psum += r`` lands
  it in ``t`` (:func:`assign`, :func:`accumulate`); the first other use of the new tile (an
  instruction reading or writing it), or the kernel's end, records it with the new tile as its
  destination (:meth:`Result.commit`).

Nothing edits an event after it is recorded; program order is the order the instructions ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar, overload

import numpy as np

from . import dtypes as dt
from . import limits
from .context import RunContext, lenient
from .errors import NKISyntaxError, SimTypeError, SimValueError, partition_error
from .memory import BY_OTHER, BY_TENSOR_ENGINE, NEVER, Alloc
from .tensor import HBM_KINDS, ON_CHIP, PSUM, SBUF, Tensor, fresh
from .trace import ACT, DMA, DVE, PE, Buffer, Dma, Elementwise, Engine, Event, Matmul, Payload, Reduce, Transpose

OPS: dict = {}  # op name -> the core op function (ctx, dst, ...)


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()  # dst of a value-returning front-end call: land later (module docstring)


# argument types of the core ops' signatures
Dst = Tensor | _Pending | None  # a destination tensor, PENDING, or None (a new tile now)
MaskArg = np.ndarray | bool | None  # an instruction's mask (the front end evaluated it)
Operand = Tensor | float | int | None  # a tile or a scalar
OpArg = Any  # an ALU op: nl.add, np.add or "add"
DTypeArg = Any  # an NKI dtype, a NumPy dtype or its name
EngineArg = Any  # an ISA engine enum member (or an int naming one)
EnumArg = Any  # another ISA enum member (or an int naming one)
AxisArg = int | Sequence[int]
ShapeArg = int | Sequence[int] | None
_TensorT = TypeVar("_TensorT", bound=Tensor)


def op(fn: Callable) -> Callable:
    """Register a core op under its function name (``grep -n "^def NAME" nki_kernels/sim/core/*.py``)."""
    OPS[fn.__name__] = fn
    return fn


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
UNARY: dict[str, tuple[Callable[..., Any] | None, Engine]] = {
    "exp": (np.exp, ACT),
    "log": (np.log, ACT),
    "sqrt": (np.sqrt, ACT),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), ACT),
    "reciprocal": (lambda x: 1.0 / x, ACT),
    "square": (np.square, ACT),
    "negative": (np.negative, DVE),
    "abs": (np.abs, DVE),
    "sign": (np.sign, ACT),
    "sin": (np.sin, ACT),
    "cos": (np.cos, ACT),
    "tan": (np.tan, ACT),
    "tanh": (np.tanh, ACT),
    "arctan": (np.arctan, ACT),
    "erf": (_erf, ACT),
    "erf_dx": (lambda x: np.float32(2 / math.sqrt(math.pi)) * np.exp(-x * x), ACT),
    "sigmoid": (_sigmoid, ACT),
    "relu": (lambda x: np.maximum(x, 0), ACT),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / _SQ2)), ACT),
    "gelu_dx": (
        lambda x: 0.5 * (1 + _erf(x / _SQ2)) + x * np.exp(-0.5 * x * x) / np.float32(math.sqrt(2 * math.pi)),
        ACT,
    ),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(_SQ2PI * (x + 0.044715 * x**3))), ACT),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), ACT),
    "silu": (lambda x: x * _sigmoid(x), ACT),
    "silu_dx": (lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), ACT),
    "softplus": (lambda x: np.logaddexp(0, x), ACT),
    "mish": (lambda x: x * np.tanh(np.logaddexp(0, x)), ACT),
    "ceil": (np.ceil, DVE),
    "floor": (np.floor, DVE),
    "trunc": (np.trunc, DVE),
    "copy": (lambda x: x, ACT),
    "identity": (lambda x: x, ACT),
    "logical_not": (lambda x: x == 0, DVE),
    "invert": (None, DVE),
}

# name -> fp32 binary function; comparisons/logical return bool
BINARY: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "max": np.maximum,
    "min": np.minimum,
    "fmod": np.fmod,
    "mod": np.mod,
    "floor_divide": np.floor_divide,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
# NKI 0.6 nl: the operand with the larger (smaller) magnitude, signed; y on ties (NL ``abs_max`` examples)
BINARY["abs_max"] = lambda a, b: np.where(np.abs(a) > np.abs(b), a, b)
BINARY["abs_min"] = lambda a, b: np.where(np.abs(a) < np.abs(b), a, b)

# Python operators on tensors, as both front ends map them to nl.* ops: (dunder stem, nl op).  The
# arithmetic and bitwise ones also get their reflected form (``__radd__``); comparisons do not.
OPERATOR_BINARY: tuple[tuple[str, str], ...] = (
    ("add", "add"),
    ("sub", "subtract"),
    ("mul", "multiply"),
    ("truediv", "divide"),
    ("pow", "power"),
    ("mod", "mod"),
    ("and", "bitwise_and"),
    ("or", "bitwise_or"),
    ("xor", "bitwise_xor"),
    ("lshift", "left_shift"),
    ("rshift", "right_shift"),
)
OPERATOR_COMPARE: tuple[tuple[str, str], ...] = (
    ("lt", "less"),
    ("le", "less_equal"),
    ("gt", "greater"),
    ("ge", "greater_equal"),
    ("eq", "equal"),
    ("ne", "not_equal"),
)
UNARY["gelu_apprx_sigmoid_dx"] = (lambda x: _sigmoid(1.702 * x) * (1 + 1.702 * x * (1 - _sigmoid(1.702 * x))), ACT)
BITWISE: dict[str, Callable[..., Any]] = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}
COMPARE = {
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
}

# ---- sums in the device's order ------------------------------------------------------------------
# A free-axis tensor_reduce(add) on a real NeuronCore (trn1) equals a left-to-right float32 sum bit for
# bit, 4 seeds x 4,096 rows of 128 fp32; NumPy's pairwise np.sum differs in ~78 % of those rows by up
# to 10 ULP (LaelaZorana/kernel-grader-mi300x-rocm-trainium-nki @ 50e9a9d, kernel-nki/README.md and
# dataset/nki_bins.jsonl).  The accumulator starts at +0.0: the published sequential reference starts
# from zeros (kernel-nki/histogram_nki.py), and the ScalarE pipelined reduction of the arch guide
# (trainium_inferentia2_arch.rst "Pipelined Reduction") resets its register to zero and adds each
# element in turn.  The measured rows are positive, so they cannot tell +0.0 from the first element;
# the start matters only for a row of -0.0 (+0.0 here, -0.0 from the first element).  Several
# reduced axes are summed in row-major order of the reduced elements -- an assumption (the device
# data reduce one axis).  Unknown: trn2, the PSUM accumulation order of matmuls, activation tables.
_ZERO = np.float32(0.0)
_ACCUMULATE_BELOW = 8  # fewer kept elements: one np.add.accumulate chain per row is faster
# a short reduced axis over many kept elements (pooling-like): add its slices, no transposed copy
# (measured here: (128, 4, 512) over axis 1, 60 us against 121 us; (128, 16) over axis 1, 10 us against 5)
_FOLD_SUM_MAX_LEN, _FOLD_SUM_MIN_KEPT = 16, 2048


def _rows_reduce_in_order() -> bool:
    """Does ``np.add.reduce(c, axis=0)`` of a C-contiguous (n, k >= 2) float32 array add the rows in
    order (the kept axis the inner loop)?  NumPy does not document it: checked once on data where its
    pairwise order (8 lanes) gives another result (1 + 2**-23 instead of 1.0)."""
    c = np.full((16, 2), 2.0**-24, np.float32)
    c[0] = 1.0
    return bool((np.add.reduce(c, axis=0) == 1.0).all())


_ROWS_IN_ORDER = _rows_reduce_in_order()


def _axes_of(nd: int, axis: AxisArg | None) -> tuple[int, ...]:
    """The reduced axes, sorted, negative axes normalised (as NumPy)."""
    if axis is None:
        return tuple(range(nd))
    return tuple(sorted({int(x) % nd for x in ((axis,) if isinstance(axis, (int, np.integer)) else axis)}))


def device_sum(a: np.ndarray, axis: AxisArg | None = None, keepdims: bool = False) -> np.ndarray:
    """``np.sum(a, axis, keepdims)`` in the device's order: per kept element, a float32 accumulator
    starting at +0.0 adds the reduced elements one at a time (row-major over the reduced axes), each
    addition rounded once.  Vectorised across the kept elements: the reduced axes are moved first in
    a contiguous copy and NumPy adds its rows in order (``_rows_reduce_in_order``); with fewer than
    ``_ACCUMULATE_BELOW`` kept elements, ``np.add.accumulate`` (sequential by definition) runs along
    each row instead; a short reduced axis over many kept elements adds its slices one by one."""
    v = np.asarray(a, dtype=np.float32)
    axes = _axes_of(v.ndim, axis)
    kept = tuple(i for i in range(v.ndim) if i not in axes)
    kshape = tuple(v.shape[i] for i in kept)
    n = math.prod(v.shape[i] for i in axes)
    k = math.prod(kshape)
    if n == 0 or k == 0:
        r = np.zeros(kshape, np.float32)
    elif n == 1:
        r = v.reshape(kshape) + _ZERO
    elif n <= _FOLD_SUM_MAX_LEN and k >= _FOLD_SUM_MIN_KEPT:
        t = v.transpose(axes + kept).reshape((n,) + kshape)
        r = t[0] + _ZERO
        for i in range(1, n):
            r += t[i]
    elif k < _ACCUMULATE_BELOW or not _ROWS_IN_ORDER:
        rows = v.transpose(kept + axes).reshape(k, n)
        r = (np.add.accumulate(rows, axis=1)[:, -1] + _ZERO).reshape(kshape)
    else:
        cols = np.ascontiguousarray(v.transpose(axes + kept)).reshape(n, k)
        r = (np.add.reduce(cols, axis=0) + _ZERO).reshape(kshape)
    return np.expand_dims(r, axes) if keepdims else r


def device_mean(
    a: np.ndarray, axis: AxisArg | None = None, keepdims: bool = False, where: np.ndarray | None = None
) -> np.ndarray:
    """``np.mean`` in the device's order: :func:`device_sum` of the selected elements, then one float32
    division by their count (2.26 nl.mean: "Similar to numpy.mean", which divides the sum; a multiply
    by a rounded 1/n would differ by up to 1 ULP -- the device's way is unknown)."""
    v = np.asarray(a, dtype=np.float32)
    axes = _axes_of(v.ndim, axis)
    s = device_sum(v if where is None else np.where(where, v, _ZERO), axes, keepdims=True)
    if where is None:
        n: np.ndarray | np.float32 = np.float32(math.prod(v.shape[i] for i in axes))
    else:  # counts of 0/1 are exact in float32 below 2**24
        n = np.sum(np.broadcast_to(where, v.shape), axis=axes, keepdims=True, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):  # nothing selected: not written (the out mask)
        r = np.divide(s, n, dtype=np.float32)
    return r if keepdims else r.squeeze(axes)


def device_var(
    a: np.ndarray, axis: AxisArg | None = None, keepdims: bool = False, where: np.ndarray | None = None
) -> np.ndarray:
    """``np.var`` (ddof 0) in the device's order, NumPy's two passes: the mean (:func:`device_mean`),
    then the mean of the squared deviations, every sum a :func:`device_sum` (2.26 nl.var: "Similar to
    numpy.var")."""
    v = np.asarray(a, dtype=np.float32)
    d = v - device_mean(v, axis, True, where)
    return device_mean(d * d, axis, keepdims, where)


REDUCE: dict[str, Callable[..., Any]] = {
    "add": device_sum,
    "multiply": np.prod,
    "maximum": np.max,
    "max": np.max,
    "minimum": np.min,
    "min": np.min,
    "logical_and": np.all,
    "logical_or": np.any,
    "bitwise_and": np.bitwise_and.reduce,
    "bitwise_or": np.bitwise_or.reduce,
    "bitwise_xor": np.bitwise_xor.reduce,
}

# max/min as a fold of np.maximum/np.minimum over the slices of short reduced axes: NumPy's reduce over
# a short (e.g. pooling, length 2) axis of a strided view runs its inner loop once per output element
# and is ~40x slower than the fold (measured: 5.4 ms vs 0.13 ms for a (128, 8, 111, 2) view).  The
# result is the same value (max/min are exact and NaN-propagating in either order).
_FOLD = {"maximum": np.maximum, "max": np.maximum, "minimum": np.minimum, "min": np.minimum}
_FOLD_MAX_LEN = 16


def reduce_values(name: str, v: np.ndarray, axes: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    """``REDUCE[name](v, axis=axes, keepdims=keepdims)`` with a fast path for max/min over short axes."""
    fold = _FOLD.get(name)
    if fold is None or any(v.shape[a] > _FOLD_MAX_LEN or v.shape[a] == 0 for a in axes):
        return REDUCE[name](v, axis=axes, keepdims=keepdims)
    r = v
    for a in sorted(axes, reverse=True):
        idx: list[slice | int] = [slice(None)] * r.ndim
        idx[a] = 0
        acc = r[tuple(idx)]
        for i in range(1, r.shape[a]):
            idx[a] = i
            acc = fold(acc, r[tuple(idx)])
        r = acc
    if keepdims:
        r = np.expand_dims(r, tuple(sorted(axes)))
    return r


_NP_CODES = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.divide: "divide",
    np.power: "power",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.fmod: "fmod",
    np.mod: "mod",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.logical_and: "logical_and",
    np.logical_or: "logical_or",
    np.logical_xor: "logical_xor",
    np.bitwise_and: "bitwise_and",
    np.bitwise_or: "bitwise_or",
    np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift",
    np.right_shift: "right_shift",
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.square: "square",
    np.tanh: "tanh",
    np.abs: "abs",
    np.negative: "negative",
    np.sign: "sign",
    np.sin: "sin",
    np.cos: "cos",
    np.tan: "tan",
    np.arctan: "arctan",
    np.ceil: "ceil",
    np.floor: "floor",
    np.trunc: "trunc",
    np.copy: "copy",
    np.reciprocal: "reciprocal",
    np.max: "max",
    np.min: "min",
    np.sum: "add",
    np.prod: "multiply",
    np.floor_divide: "floor_divide",
}
try:  # numpy aliases
    _NP_CODES[np.amax] = "max"
    _NP_CODES[np.amin] = "min"
except AttributeError:  # pragma: no cover
    pass


_MASKED_REDUCE: dict[str, tuple[Callable[..., Any], float | None]] = {
    "sum": (device_sum, None),
    "add": (device_sum, None),
    "prod": (np.prod, None),
    "multiply": (np.prod, None),
    "max": (np.max, -np.inf),
    "maximum": (np.max, -np.inf),
    "min": (np.min, np.inf),
    "minimum": (np.min, np.inf),
    "mean": (device_mean, None),
    "var": (device_var, None),
}


def masked_reduce(
    name: str, v: np.ndarray, axes: int | tuple[int, ...] | None, keepdims: bool, m: np.ndarray | bool
) -> np.ndarray:
    """Reduce only the elements ``m`` selects (a reduction's mask= selects inputs)."""
    if m is False:
        m = np.zeros(v.shape, bool)
    if name in ("all", "logical_and"):
        return np.all(v != 0, axis=axes, keepdims=keepdims, where=m).astype(np.float32)
    if name in ("logical_or",):
        return np.any(v != 0, axis=axes, keepdims=keepdims, where=m).astype(np.float32)
    fn, init = _MASKED_REDUCE[name]
    if fn is device_sum:
        return device_sum(np.where(m, v, _ZERO), axes, keepdims)  # +0.0 for the rest: the same sum
    kw = {} if init is None else {"initial": init}
    return np.asarray(fn(v, axis=axes, keepdims=keepdims, where=m, **kw), dtype=np.float32)


def reduce_out_mask(m: MaskArg, axes: tuple, keepdims: bool) -> MaskArg:
    """The outputs of a masked reduction that have at least one selected input."""
    if m is False:
        return False
    return np.any(m, axis=axes, keepdims=keepdims)


def number(x: object, api: str, arg: str) -> float:
    """A scalar argument (a Python or NumPy number) as a float; E010 for anything else (a tile where the
    instruction takes an immediate)."""
    if isinstance(x, (int, float, np.integer, np.floating, np.bool_)):
        return float(x)
    raise SimTypeError("E010", api, arg, f"{arg} must be a number, got {type(x).__name__}", f"Pass {arg} as a scalar")


def opcode(op: OpArg, api: str, arg: str = "op") -> str:
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
    raise NKISyntaxError(
        "E021",
        api,
        arg,
        f"{getattr(op, '__name__', op)!r} is not supported in '{api}'",
        "Pass an nl.* op such as nl.add, nl.multiply, nl.maximum, nl.exp",
    )


# ---------------------------------------------------------------------------------------
# operand validation
# ---------------------------------------------------------------------------------------


@overload
def mask_of(mask: None, shape: tuple, api: str = ...) -> None: ...
@overload
def mask_of(mask: bool, shape: tuple, api: str = ...) -> bool: ...
@overload
def mask_of(mask: np.ndarray, shape: tuple, api: str = ...) -> np.ndarray: ...
@overload
def mask_of(mask: MaskArg, shape: tuple, api: str = ...) -> MaskArg: ...


def mask_of(mask: MaskArg, shape: tuple, api: str = "mask") -> MaskArg:
    """A core mask (None, a bool, or a bool array the front end built) for an instruction whose
    output has ``shape``: None (all), a bool, or a bool array of ``shape`` (E011 if it does not
    broadcast)."""
    if mask is None:
        return None
    if mask is True or mask is False or isinstance(mask, (bool, np.bool_)):
        return bool(mask)
    m = mask
    if m.ndim < len(shape):
        m = m.reshape(m.shape + (1,) * (len(shape) - m.ndim))
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise SimValueError(
            "E011",
            api,
            "mask",
            f"mask of shape {mask.shape} does not broadcast to the instruction's shape {tuple(shape)}",
            "Build the mask from the same index expressions that index the operands",
        ) from None


# ---------------------------------------------------------------------------------------
# results and how they land
# ---------------------------------------------------------------------------------------

_BUFFER_NAME = {b: b.value for b in Buffer}  # Enum .value is a Python-level property call


class ElementwiseInfo(NamedTuple):
    """What an elementwise-class result's event needs besides sizes (its :class:`Elementwise` payload)."""

    func: str
    n_ops: int
    strided: bool
    psum_in: bool
    eviction: bool
    reduce: bool


class ReduceInfo(NamedTuple):
    """A reduction's: the ALU function and the reduced free axes (0: across partitions)."""

    func: str
    axes: int


class MatmulInfo(NamedTuple):
    """An nc_matmul's: contraction K, stationary columns M, moving columns N, input dtype, perf mode."""

    K: int
    M: int
    N: int
    in_dtype: str
    perf_mode: str


class TransposeInfo(NamedTuple):
    """An nc_transpose's: input partitions P and free size F, its dtype, the engine, a PSUM input."""

    P: int
    F: int
    in_dtype: str
    on_tensor_engine: bool
    psum_in: bool


class DmaInfo(NamedTuple):
    """A DMA's: the source tensor (None: a constant fill), read-modify-write, transposing, elements."""

    src: Any
    rmw: bool
    transpose: bool
    n_elems: int


# one record type per instruction kind (Result.info)
ResultInfo = ElementwiseInfo | ReduceInfo | MatmulInfo | TransposeInfo | DmaInfo
_new_info = tuple.__new__  # a record from a tuple at C speed (this runs once per instruction)


class Result:
    """An instruction's result before it lands: the exact value and everything its event needs
    except the destination.  ``info``: what its kind of instruction records (:data:`ResultInfo`)."""

    __slots__ = (
        "op",
        "api",
        "engine",
        "info",
        "value",
        "dtype",
        "buffer",
        "mask",
        "shape",
        "partitions",
        "free_elems",
        "in_shapes",
        "in_dtypes",
        "reads",
        "nbytes",
        "out_bytes",
        "flops",
        "extra_reads",
        "extra_writes",
        "tile",
        "where",
        "written_by",
        "origin",
        "slot",
        "private",
    )
    op: str
    api: str
    engine: Engine
    info: ResultInfo
    value: np.ndarray | None
    dtype: Any
    buffer: Buffer
    mask: MaskArg
    shape: tuple
    partitions: int
    free_elems: int
    in_shapes: list
    in_dtypes: list
    reads: list
    nbytes: int
    out_bytes: int
    flops: int
    extra_reads: tuple
    extra_writes: tuple
    tile: Tensor | None
    where: tuple | None
    written_by: int
    origin: bool
    slot: int | None
    private: bool

    def commit(self, ctx: RunContext) -> None:
        """Record the result with its new tile as its destination (the pending result's end)."""
        assert self.tile is not None and self.where is not None, "a pending result has its tile and where"
        self.release(ctx)
        record(ctx, self, self.tile, result=self.tile.alloc, where=self.where, seq=self.slot)
        direct = ctx.direct
        if direct is not None:
            # the result stays in a tile of its own: an automatically allocated tensor (a call only when
            # it can matter: the buffer's first automatic tensor, or a buffer allocated directly)
            buf = _BUFFER_NAME[self.tile.alloc.buffer]
            if direct.active or buf not in direct.first_auto:
                direct.automatic(buf, "", self.where, self.api)

    def release(self, ctx: RunContext) -> None:
        """No longer pending (it lands, or it is committed)."""
        assert self.tile is not None, "a pending result has its tile"
        self.tile.alloc.pending = None
        ctx.pending.remove(self)


def compute_result(
    value: np.ndarray | None,
    dtype: DTypeArg,
    *,
    op: str,
    api: str,
    engine: Engine,
    inputs: Sequence = (),
    mask: MaskArg = None,
    func: str = "",
    n_ops: int = 1,
    flops_per_elem: int = 1,
    buffer: Buffer = SBUF,
    axes: int | None = None,
    reduce: bool = False,
    eviction: bool = False,
    extra_reads: Sequence[Tensor] = (),
    extra_writes: tuple[Tensor, ...] = (),
    shape: tuple | None = None,
    par: int = 0,
) -> Result:
    """The :class:`Result` of an elementwise-class instruction (a :class:`Reduce` payload when
    ``axes`` -- the free axes reduced, 0: across partitions -- is given).  ``inputs``: the operands
    (tiles are read regions; scalars are skipped); ``extra_reads``/``extra_writes``: tiles the
    instruction also reads / writes besides its operands and destination."""
    r = Result()
    if shape is None:
        assert value is not None, "the shape of a result without a value is given"
        oshape = value.shape
        size = value.size
    else:
        oshape = shape
        size = 1
        for n in shape:
            size *= n
    P = oshape[par] if oshape else 1
    N = size // P if P else 0
    psum_in = strided = False
    nbytes = 0
    in_shapes, in_dtypes, reads = [], [], []
    for t in inputs:
        if not isinstance(t, Tensor):
            continue
        al = t.alloc
        shp = t._shape
        a = t.arr
        tsize = t.size if a is None else a.size
        n = tsize // shp[0] if shp and shp[0] else 0
        if n > N:
            N = n
        if al.buffer is PSUM:
            psum_in = True
        if not strided and _strided(t):
            strided = True
        nbytes += tsize * al.itemsize
        in_shapes.append(shp)
        in_dtypes.append(al.dname)
        reads.append(t.region())
    for t in extra_reads:
        reads.append(t.region())
    r.op, r.api, r.engine = op, api, engine
    if axes is None:
        r.info = _new_info(ElementwiseInfo, (func, n_ops, strided, psum_in, eviction, reduce))
    else:
        r.info = _new_info(ReduceInfo, (func, axes))
    r.value, r.dtype, r.buffer, r.mask, r.shape = value, dtype, buffer, mask, oshape
    r.partitions, r.free_elems = P, N
    r.in_shapes, r.in_dtypes, r.reads = in_shapes, in_dtypes, reads
    r.nbytes, r.out_bytes = nbytes, size
    r.flops = P * N * n_ops * flops_per_elem
    r.extra_reads, r.extra_writes = (), extra_writes
    r.tile = r.where = None
    r.written_by = BY_OTHER
    r.origin = r.private = False
    return r


def new_result(
    info: MatmulInfo | TransposeInfo,
    value: np.ndarray,
    dtype: DTypeArg,
    *,
    op: str,
    api: str,
    engine: Engine,
    inputs: Sequence[Tensor],
    partitions: int,
    free_elems: int,
    nbytes: int,
    flops: int,
    buffer: Buffer = SBUF,
    mask: MaskArg = None,
    written_by: int = BY_OTHER,
    shape: tuple | None = None,
    private: bool = False,
) -> Result:
    """The :class:`Result` of a TensorE instruction (its event sizes computed by the op); ``private``:
    ``value`` is a new array (no operand's storage)."""
    r = Result()
    r.op, r.api, r.engine, r.info = op, api, engine, info
    r.value, r.dtype, r.buffer, r.mask = value, dtype, buffer, mask
    r.shape = value.shape if shape is None else shape
    r.partitions, r.free_elems = partitions, free_elems
    r.in_shapes = [t._shape for t in inputs]
    r.in_dtypes = [t.alloc.dname for t in inputs]
    r.reads = [t.region() for t in inputs]
    r.nbytes, r.out_bytes, r.flops = nbytes, 0, flops
    r.extra_reads, r.extra_writes = (), ()
    r.tile = r.where = None
    r.written_by = written_by
    r.origin = False
    r.private = private
    return r


def record(
    ctx: RunContext,
    res: Result,
    dst: Tensor,
    *,
    accumulate: bool = False,
    result: Alloc | None = None,
    where: tuple | None = None,
    seq: int | None = None,
    reduction: bool = False,
) -> Event | None:
    """Record ``res`` with ``dst`` as its destination: the one final event of the instruction.
    ``reduction``: a compound assignment (``dst += v``) computed as a read-modify-write."""
    races = ctx.races
    f: Any = res.info  # (dispatched on its type below, without isinstance: this runs once per instruction)
    ti = type(f)
    if races is not None and ti is not DmaInfo and result is not dst.alloc:
        # iteration races (E029): accumulations are reductions (2 = PSUM matmul, exempt; 1 = other `+=`);
        # nl.loop_reduce is the documented reduction across the loops it names (2.26 nki.language
        # loop_reduce), exempt like a PSUM matmul accumulation
        races.note(
            ctx,
            dst,
            res.extra_writes,
            where,
            (2 if ti is MatmulInfo and dst.alloc.buffer is PSUM else 1)
            if accumulate
            else 2
            if res.api == "nl.loop_reduce"
            else (1 if reduction else 0),
            res.mask,
        )
    if not ctx.options.trace:
        return ctx.record(res.op, res.api, res.engine, result=result)
    dal = dst.alloc
    psum_out = dal.buffer is PSUM
    region = dst.region()
    reads = res.reads
    if accumulate or res.extra_reads:
        reads = list(reads)
        if accumulate:
            reads.append(region)
        reads.extend(res.extra_reads)
    writes = [region]
    for t in res.extra_writes:
        writes.append(t.region())
    P, N = res.partitions, res.free_elems
    nbytes = res.nbytes + res.out_bytes * dal.itemsize
    payload: Payload
    if ti is ElementwiseInfo:
        payload = Elementwise(f.func, N, f.n_ops, f.strided, f.psum_in, psum_out, f.eviction, f.reduce)
    elif ti is ReduceInfo:
        payload = Reduce(f.func, N, f.axes)
    elif ti is MatmulInfo:
        payload = Matmul(f.K, f.M, f.N, f.in_dtype, f.perf_mode, bool(accumulate))
    elif ti is TransposeInfo:
        payload = Transpose(f.P, f.F, f.in_dtype, f.on_tensor_engine, f.psum_in, psum_out)
    else:
        src, rmw, transpose, n_elems = f
        return record_dma(
            ctx,
            res.api,
            dst,
            src,
            n_elems,
            op=res.op,
            rmw=rmw,
            transpose=transpose,
            index_reads=res.reads[1:],
            where=where,
            result=result,
            seq=seq,
            mask=res.mask,
        )
    return ctx.record(
        res.op,
        res.api,
        res.engine,
        P,
        N,
        res.in_shapes,
        res.shape,
        res.in_dtypes,
        dal.dname,
        nbytes,
        res.flops,
        reads,
        writes,
        payload,
        result,
        where,
        seq,
    )


@overload
def emit(ctx: RunContext, dst: _Pending | None, res: Result, *, accumulate: bool = ...) -> Tensor: ...
@overload
def emit(ctx: RunContext, dst: Tensor, res: Result, *, accumulate: bool = ...) -> None: ...
@overload
def emit(ctx: RunContext, dst: Dst, res: Result, *, accumulate: bool = ...) -> Tensor | None: ...


def emit(ctx: RunContext, dst: Dst, res: Result, *, accumulate: bool = False) -> Tensor | None:
    """Hand a result to its destination (module docstring): land it in ``dst``, or a new tile
    (recorded now for ``dst=None``, pending for ``dst=PENDING``).  Returns the new tile or None."""
    if dst is None or dst is PENDING:
        assert res.value is not None, "a result that lands has its value"
        tile = fresh(
            res.value,
            res.dtype,
            res.buffer,
            api=res.api,
            mask=res.mask,
            kind=res.written_by,
            origin=res.origin,
            private=res.private,
            ctx=ctx,
        )
        if dst is None:
            record(ctx, res, tile, result=tile.alloc)
        else:
            res.tile = tile
            res.where = ctx.where()
            if ctx.options.trace:
                events = ctx.trace.events
                res.slot = len(events)
                events.append(None)  # the instruction's place in program order (ctx.reserve)
            else:
                res.slot = -1
            tile.alloc.pending = res
            ctx.pending.append(res)
        return tile
    assert isinstance(dst, Tensor), "dst is a tensor, PENDING or None"
    if res.engine is not DMA and dst.alloc.buffer in HBM_KINDS:
        short = res.api.split(".")[-1]
        raise SimTypeError(
            "E007",
            short,
            "dst",
            f"'{short}' writes sbuf|psum, got a tensor in '{dst.alloc.buffer.value}'",
            "Write an SBUF/PSUM tile, then dma_copy it to HBM",
        )
    how = fit_exact(res.api, dst, res.shape)
    if res.engine is PE and dst.alloc.buffer is not PSUM:
        # TensorE writes only PSUM: the result lands in a PSUM tile and a copy evicts it to dst
        tile = emit(ctx, None, res)
        copy_into(ctx, dst, tile, api=res.api, eviction=True, how=how)
        return None
    land(ctx, res, dst, how=how, accumulate=accumulate)
    return None


def land(
    ctx: RunContext,
    res: Result,
    dst: Tensor,
    *,
    how: str = "same",
    mask: MaskArg = None,
    accumulate: bool = False,
    where: tuple | None = None,
    seq: int | None = None,
) -> None:
    """Write ``res``'s exact value into ``dst`` (rounded once to its dtype) under the instruction's
    and the assignment's masks, accumulating onto what is there when ``accumulate`` (the first write
    to a never-written PSUM element overwrites it), and record the instruction's event."""
    api = res.api
    v = res.value
    assert v is not None, "a result that lands has its value"
    if how != "same":
        v = place(v, dst._shape, how)
    vm = res.mask
    lm = mask
    if vm is not None:
        vm = place(vm, dst._shape, how) if how != "same" and isinstance(vm, np.ndarray) else vm
        lm = vm if mask is None or mask is True else (False if mask is False or vm is False else mask & vm)
    if accumulate and lm is None and how == "same" and dst.accumulate(v, res.written_by):
        record(ctx, res, dst, accumulate=accumulate, where=where, seq=seq)
        return
    if accumulate:
        cur = dst.read_raw()
        if dst.alloc.psum_fill != BY_TENSOR_ENGINE or dst.alloc.psum_kind is not None:
            never = dst.written_kinds() == NEVER
            if never.any():
                cur = np.where(never, np.float32(0), cur)
        v = cur.astype(np.float32, copy=False) + v
    dst.write(v, lm, api=api, kind=res.written_by)
    record(ctx, res, dst, accumulate=accumulate, where=where, seq=seq)


def land_pending(
    ctx: RunContext, dst: Tensor, value: Tensor, *, api: str, how: str, mask: MaskArg = None, accumulate: bool = False
) -> bool:
    """If ``value`` is a pending result's tile itself, land the result in ``dst`` (``dst[...] = value``
    / ``+=``) and return True."""
    res = value.alloc.pending
    if res is None or res.tile is not value:
        return False
    dal = dst.alloc
    if res.engine is DMA and dal.buffer is PSUM:
        res.commit(ctx)
        raise SimTypeError(
            "E007",
            api,
            dst.name,
            f"Expected the destination of '{res.op}' to be in address space 'sbuf|hbm', but got a "
            f"tile in 'psum' instead",
            "DMA cannot write PSUM: load into SBUF",
        )
    if res.engine is PE and dal.buffer is not PSUM:
        # TensorE writes only PSUM ("nc_matmul must write outputs to PSUM", 2.26 isa doc):
        # `sbuf[...] = nc_matmul(...)` / `= nc_transpose(...)` is the PSUM result plus a copy into
        # SBUF -- 2.26 nl.store: "an extra copy will be performed"; the errors doc describes
        # assignment as a copy.  The copy is an eviction.
        res.commit(ctx)
        rm = res.mask
        if rm is not None and rm is not True and how == "same" and mask is None:
            mask = rm  # the instruction's masked-out elements are not part of its result: not copied
        copy_into(ctx, dst, value, api=api, eviction=True, how=how, mask=mask)
        return True
    if dal.buffer not in ON_CHIP and res.engine is not DMA:
        return False
    res.release(ctx)
    ctx.memory.release(value.alloc)  # the new tile is consumed: it never occupied memory next to dst
    land(ctx, res, dst, how=how, mask=mask, accumulate=accumulate, where=res.where, seq=res.slot)
    rec = ctx.recorder
    if rec is not None:  # a loop body being traced (program.py): the result's step also writes dst
        if accumulate:
            rec.fail("a result accumulated with `+=`")
        else:
            rec.landed(value, dst, how, mask)
    return True


def fit_exact(api: str, dst: Tensor, shape: tuple[int, ...]) -> str:
    """ISA dst rule (NKI 0.6 ISA, every instruction: "dst" has the result's shape): the result's
    partition count and element count per partition; 'same' or 'reshape'."""
    if dst._shape == shape:
        return "same"
    P, F = shape[0], free_size(shape)
    if dst._shape[0] != P or free_size(dst._shape) != F:
        raise SimValueError(
            "E011",
            api.split(".")[-1],
            "dst",
            f"dst{list(dst._shape)} does not match the result{list(shape)}: it needs "
            f"{P} partitions and {F} elements per partition",
            "Slice or reshape dst to the instruction's output shape",
        )
    return "reshape"


def copy_into(
    ctx: RunContext,
    dst: Tensor,
    src: Tensor,
    *,
    api: str,
    eviction: bool = False,
    how: str = "same",
    mask: MaskArg = None,
) -> None:
    """An on-chip copy instruction (VectorE tensor_copy) of ``src`` into ``dst``."""
    tile(src, api, "value")
    v = src.read(
        mask
        if mask is not None and mask is not True and mask is not False and getattr(mask, "shape", None) == src._shape
        else None
    )
    dst.write(place(v, dst._shape, how) if how != "same" else v, mask, api=api)
    res = compute_result(
        v,
        dst.dtype,
        op="tensor_copy",
        api=api,
        engine=DVE,
        inputs=(src,),
        func="copy",
        eviction=eviction,
        shape=src._shape,
    )
    record(ctx, res, dst)


def record_inplace(ctx: RunContext, dst: Tensor, res: Result) -> None:
    """Record an instruction that wrote its destination itself (a partial or predicated write)."""
    record(ctx, res, dst)


def _space_error(api, arg, t, allowed):
    want = "hbm" if allowed == HBM_KINDS else "|".join(a for a in allowed)
    got = t.buffer
    return SimTypeError(
        "E007",
        api,
        arg,
        f"Expected operand '{arg}' of '{api}' to be in address space '{want}', but got a tile in '{got}' instead",
        {
            "hbm": "Load it into SBUF first (nl.load / nisa.dma_copy)",
            "psum": "Copy it out of PSUM first (nisa.tensor_copy)",
            "sbuf": "Use an SBUF/PSUM tile",
        }.get(got, "Move it to the right buffer"),
    )


@overload
def tile(
    x: _TensorT, api: str, arg: str, buffers: Sequence[Buffer | str] = ..., engine_access: bool = ...
) -> _TensorT: ...
@overload
def tile(x: Any, api: str, arg: str, buffers: Sequence[Buffer | str] = ..., engine_access: bool = ...) -> Tensor: ...


def tile(x: Any, api: str, arg: str, buffers: Sequence[Buffer | str] = ON_CHIP, engine_access: bool = True) -> Tensor:
    """Check that ``x`` is a tile (partition axis first) in one of ``buffers``; with
    ``engine_access`` (a compute-engine operand, not a DMA side) also the partition access rules."""
    if not isinstance(x, Tensor):
        raise SimTypeError(
            "E010",
            api,
            arg,
            f"expected a tile, got {type(x).__name__}",
            "Pass an SBUF/PSUM tile (e.g. from nl.load or nl.ndarray)",
        )
    if x.out_of_bounds:
        x._resolve(None)  # an access pattern outside its tensor: E008 at the instruction (indirect.py)
    al = x.alloc
    if al.pending is not None:
        x.settle()  # an operand that is a pending result: its instruction comes first
    b = al.buffer
    if b not in buffers:
        raise _space_error(api, arg, x, buffers)
    onchip = b is SBUF or b is PSUM
    if onchip and x.dynamic and engine_access:
        # ERR err_copy_dynamic_indirect_indices_not_natively_supported (SDK 2.26 nki.errors.rst): an on-chip
        # access through a runtime index tile is only supported by nisa.tensor_copy_dynamic_src
        raise NKISyntaxError(
            "E014",
            api,
            arg,
            f"`{x.name}` is accessed through a runtime index tile on chip: "
            "dynamic indirect indices are not natively supported by this instruction",
            "Copy the dynamically indexed tile first: t = nisa.tensor_copy_dynamic_src(src[...])",
        )
    if onchip and x.par != 0:
        raise SimTypeError(
            "E010",
            api,
            arg,
            f"Failed to infer tile from tensor '{x.name}': its partition axis is not the "
            f"leading axis of the access {x.shape}",
            "Index the block dimensions with ints so the nl.par_dim axis comes first",
        )
    shp = x._shape
    if shp and shp[0] > limits.PMAX:
        raise partition_error(api, arg, shp[0])
    if engine_access and onchip and not x.access_ok:
        a = x.arr
        # fast path: a basic view starting at partition 0 with unit partition stride, <= 4 free axes
        if not (x.off == 0 and a is not None and a.ndim <= 5 and (a.shape[0] == 1 or a.strides[0] == al.row_bytes)):
            _partition_access(x, api, arg)
        x.access_ok = True  # the rules depend only on the view's geometry: checked once per view
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
        return 0, 1  # an index view of a block-dimension tensor: blocks start at partition 0
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
        raise SimValueError(
            "E026",
            api,
            arg,
            f"the access of '{x.name}' strides the partition axis (step "
            f"{step}); hardware does not allow partition striding",
            "Access consecutive partitions (copy a strided selection with a DMA first)",
        )
    allowed = (0,) if n > 64 else (0, 64) if n > 32 else (0, 32, 64, 96)
    if start not in allowed:
        # the arch guide says the start partition is "currently handled by the tensor allocator in Neuron
        # Compiler": it constrains where tensors are placed, and public code that ran writes other slices (an
        # NxDI NKI 0.7 kernel: a 1-partition tensor_copy at partition 1; spec corrections turn 4, item K)
        lenient(
            "arch.start_partition",
            f"an access of {n} partitions of '{x.name}' starts at partition {start}; the arch guide's allowed "
            f"starts for {n} partitions are {'/'.join(map(str, allowed))} (the compiler's allocator handles it, "
            "possibly with a copy)",
            "Start the tile slice at an allowed partition (or allocate a separate tile)",
            op=api,
            arg=arg,
        )
    a = x.arr
    if a is not None and a.ndim > 5:
        dims = [(d, st) for d, st in zip(a.shape[1:], a.strides[1:], strict=False) if d != 1]
        merged: list[tuple[int, int]] = []
        for d, st in dims:
            if merged and merged[-1][1] == st * d:
                merged[-1] = (merged[-1][0] * d, st)
            else:
                merged.append((d, st))
        if len(merged) > 4:
            raise SimValueError(
                "E026",
                api,
                arg,
                f"the access of '{x.name}' {tuple(x.shape)} needs a "
                f"{len(merged)}-D free-axis access pattern; engines support up to 4-D",
                "Reshape contiguous free axes together or split the instruction",
                got=len(merged),
                limit=4,
            )


def tensor_arg(x: Any, api: str, arg: str, fix: str | None = None) -> Tensor:
    """``x`` as a tensor argument (E010 when it is none: a number, None, PENDING)."""
    if not isinstance(x, Tensor):
        raise SimTypeError("E010", api, arg, f"expected a tensor, got {type(x).__name__}", fix)
    return x


def hbm(x: Any, api: str, arg: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise SimTypeError("E007", api, arg, f"expected an HBM tensor, got {type(x).__name__}")
    if x.buffer not in HBM_KINDS:
        raise _space_error(api, arg, x, HBM_KINDS)
    return x


def same_partitions(api: str, **tiles: Tensor) -> None:
    it = iter(tiles.values())
    p0 = next(it)._shape[0]
    if all(t._shape[0] == p0 for t in it):
        return
    ps = {k: v.shape[0] for k, v in tiles.items() if isinstance(v, Tensor)}
    if len(set(ps.values())) > 1:
        desc = ", ".join(f"{k}{list(tiles[k].shape)}" for k in ps)
        raise SimValueError(
            "E002",
            api,
            None,
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({desc}) of '{api}'",
            "Slice the operands to the same partition range",
        )


def pa_pad(a: np.ndarray, nd: int) -> np.ndarray:
    """Partition-aligned broadcasting: pad trailing 1s (spec §5: (P,) behaves as (P,1))."""
    if a.ndim < nd:
        return a.reshape(a.shape + (1,) * (nd - a.ndim))
    return a


def pa_shape(api: str, *shapes: tuple) -> tuple:
    nd = max(len(s) for s in shapes)
    padded = [tuple(s) + (1,) * (nd - len(s)) for s in shapes]
    if len({s[0] for s in padded if s and s[0] != 1}) > 1:
        # ERR err_num_partition_mismatch (SDK 2.26 nki.errors.rst): operands over different partition counts are
        # E002, whichever API gets them (nisa.tensor_tensor, a scalar column, nl.add, ...); a 1-partition operand
        # broadcasts in the nl.* APIs
        raise SimValueError(
            "E002",
            api,
            None,
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters "
            f"({', '.join(str(list(s)) for s in shapes)}) of '{api}'",
            "Slice the operands to the same partition range (or broadcast_to a 1-partition one)",
        )
    try:
        return np.broadcast_shapes(*padded)
    except ValueError:
        raise SimValueError(
            "E011",
            api,
            None,
            "Parameter shapes " + ", ".join(str(tuple(s)) for s in shapes) + " could not be broadcast together",
            "Operands must match or broadcast partition-first ((P,1) or (1,F) against (P,F))",
        ) from None


def free_size(shape: Sequence[int]) -> int:
    n = 1
    for s in shape[1:]:
        n *= s
    return n


def value_of(x: Tensor | float, mask: MaskArg = None) -> np.ndarray | float:
    """fp32 array of a tile, or the scalar itself."""
    if isinstance(x, Tensor):
        return x.read_f32(mask)
    return x


def dtype_of(x: Operand) -> DTypeArg:
    return x.dtype if isinstance(x, Tensor) else dt.scalar_dtype(x)


def out_dtype(dtype: DTypeArg, default: DTypeArg, api: str) -> DTypeArg:
    return default if dtype is None else dt.canonical(dtype, op=api)


def _strided(t: Tensor) -> bool:
    """Does the innermost free axis step more than 16 bytes (no VectorE fast mode)?  For an
    arange/mgrid view the step is read off its index arrays: an identity t[i.p, i.x] is not
    strided."""
    a = t.arr
    if a is not None:
        return a.ndim >= 2 and a.shape[-1] > 1 and abs(a.strides[-1]) > 16
    shape = t._shape
    if len(shape) < 2 or shape[-1] < 2:
        return False
    step = 0
    assert t.src is not None and t.key is not None, "an index-array view has src and key"
    for k, st in zip(t.key, t.src.strides, strict=False):
        if isinstance(k, np.ndarray) and k.shape[-1] > 1:
            row = k.reshape(-1, k.shape[-1])[0]
            d = np.diff(row)
            if d.size and not np.all(d == d[0]):
                return True
            step += int(d[0]) * st if d.size else 0
    return abs(step) > 16


def _same_key(ka, kb) -> bool:
    if isinstance(ka, np.ndarray) or isinstance(kb, np.ndarray):
        return (
            isinstance(ka, np.ndarray)
            and isinstance(kb, np.ndarray)
            and (ka is kb or ka.shape == kb.shape and np.array_equal(ka, kb))
        )
    return ka == kb


def _same_region(a: Tensor, b: Tensor) -> bool:
    """Is ``b`` the very view ``a`` (the write-back half of ``view[...] += x``)?"""
    if a.alloc is not b.alloc:
        return False
    if a.arr is None or b.arr is None:
        # `t[i_p, i_f] += x` writes back its own arange view: no extra copy
        return (
            a.arr is None
            and b.arr is None
            and a.src is b.src
            and a.off == b.off
            and a._shape == b._shape
            and a.key is not None  # both are index-array views: set
            and b.key is not None
            and len(a.key) == len(b.key)
            and all(map(_same_key, a.key, b.key))
        )
    return a.off == b.off and a.arr.shape == b.arr.shape and a.arr.strides == b.arr.strides


def _fit(api, value_shape, dst_shape, dst):
    """How a value of value_shape lands in dst_shape (of tensor ``dst``): 'same' | 'reshape' | 'broadcast'."""
    if value_shape == dst_shape or tuple(value_shape) == tuple(dst_shape):
        return "same"
    nd = max(len(value_shape), len(dst_shape))
    vs = tuple(value_shape) + (1,) * (nd - len(value_shape))
    ds = tuple(dst_shape) + (1,) * (nd - len(dst_shape))
    if (
        vs == ds
        or int(np.prod(value_shape)) == int(np.prod(dst_shape))
        and tuple(s for s in value_shape if s != 1) == tuple(s for s in dst_shape if s != 1)
    ):
        return "reshape"
    try:
        if np.broadcast_shapes(vs, ds) == ds:
            return "broadcast"
    except ValueError:
        pass
    raise SimValueError(
        "E011",
        api,
        dst.name,
        f"Illegal assignment destination shape in 'a = b': destination {tuple(dst_shape)} "
        f"cannot hold value {tuple(value_shape)}",
        "Slice the destination to the value's shape",
    )


def place(value: np.ndarray, dst_shape: tuple, how: str) -> np.ndarray:
    if how == "same":
        return value
    if how == "reshape":
        return value.reshape(dst_shape)
    nd = len(dst_shape)
    return np.broadcast_to(pa_pad(value, nd), dst_shape)


# ---------------------------------------------------------------------------------------
# assignment and +=
# ---------------------------------------------------------------------------------------


def assign(ctx: RunContext, dst: Tensor, value: Any, *, api: str = "dst[...] = value", mask: MaskArg = None) -> None:
    """``dst[...] = value``: the pending result lands in dst; another tile is copied (on chip) or
    moved by DMA; a scalar is a memset (or a DMA of a constant into HBM)."""
    m = mask_of(mask, dst._shape, api)
    if isinstance(value, Tensor):
        if _same_region(dst, value):
            return  # `t[...] += x` writes back its own view: already done
        how = _fit(api, value._shape, dst._shape, dst)
        if land_pending(ctx, dst, value, api=api, how=how, mask=m):
            return
        if dst.alloc.buffer in ON_CHIP and value.alloc.buffer in ON_CHIP:
            copy_into(
                ctx,
                dst,
                value,
                api=api,
                how=how,
                mask=m,
                eviction=value.alloc.buffer is PSUM and dst.alloc.buffer is SBUF,
            )
            return
        dma_transfer(ctx, dst, value, api=api, mask=m, how=how)
        return
    if isinstance(value, (int, float, np.integer, np.floating, bool, np.bool_)):
        dst.write(value, m, api=api)
        if dst.alloc.buffer in ON_CHIP:
            res = compute_result(
                None, dst.dtype, op="memset", api=api, engine=DVE, func="memset", shape=dst._shape, par=dst.par or 0
            )
            record(ctx, res, dst)
        else:
            record_dma(ctx, api, dst, None, dst.size)
        return
    raise SimTypeError(
        "E010",
        api,
        "value",
        f"cannot assign a {type(value).__name__} to an NKI tensor",
        "Assign a tile (e.g. the result of nl.load / nisa.tensor_copy) or a scalar",
    )


_AUGMENTED = {"add": "+=", "subtract": "-=", "multiply": "*=", "divide": "/="}


def accumulate(ctx: RunContext, dst: _TensorT, other: Tensor | float, opname: str, *, warn: bool = True) -> _TensorT:
    """``dst += other`` (and -=, *=, /=).  A pending matmul result accumulates in PSUM for free
    (spec §8); anything else is a VectorE read-modify-write (warned)."""
    api = _AUGMENTED[opname]
    res = other.alloc.pending if isinstance(other, Tensor) else None
    if res is not None and res.tile is other and opname == "add" and dst.alloc.buffer is PSUM and res.op == "nc_matmul":
        how = _fit(api, other._shape, dst._shape, dst)
        res.release(ctx)
        # the first `psum += nc_matmul(...)` into never-written PSUM overwrites: official samples
        # accumulate into nl.ndarray(..., buffer=nl.psum) (spec Corrections 8); per
        # element, so a partly written accumulator is handled too
        ctx.memory.release(other.alloc)
        rec = ctx.recorder
        in_place = rec is not None and res.mask is None and how == "same" and dst.accumulates_in_place()
        land(ctx, res, dst, how=how, accumulate=True, where=res.where, seq=res.slot)
        if rec is not None:  # a loop body being traced (program.py): the matmul's step adds into dst
            rec.landed(other, dst, "accumulate" if in_place else "first +=", res.mask)
        return dst
    if res is not None and res.engine is DMA and res.tile is other and dst.alloc.buffer is PSUM:
        res.commit(ctx)
        raise SimTypeError(
            "E007",
            api,
            dst.name,
            f"Expected the destination of '{res.op}' to be in address space 'sbuf|hbm', but got a "
            f"tile in 'psum' instead",
            "DMA cannot write PSUM: load into SBUF",
        )
    if warn and ctx.options.warn_non_psum_accumulate:
        # `sbuf += nl.matmul(...)`, `sbuf += psum_tile` are legal NKI 0.1: a VectorE
        # read-modify-write (spec §8) -- warned, never raised
        what = "a matmul result accumulated into PSUM" if dst.alloc.buffer is not PSUM else "a matmul result"
        ctx.warn_once(
            "iadd",
            f"`{api}` on a {dst.alloc.buffer.value.upper()} tile with something other than "
            f"{what} is a VectorE read-modify-write; only `psum += nc_matmul(...)` is "
            f"reliable on hardware (spec §8, aws-neuron-sdk#1051)",
        )
    if dst.alloc.buffer not in ON_CHIP:
        raise SimTypeError(
            "E007",
            api,
            dst.name,
            f"`{api}` needs an SBUF/PSUM destination, got {dst.alloc.buffer.value}",
            "Accumulate on chip, then store",
        )
    dst = tile(dst, api, "dst")
    b = value_of(other)
    if isinstance(other, Tensor):
        tile(other, api, "value")
        assert isinstance(b, np.ndarray), "a tensor's value is an array"
        b = pa_pad(b, dst.ndim)
    r = BINARY[opname](dst.read_f32(), b)
    dst.write(r, api=api)
    res = compute_result(
        r,
        dst.dtype,
        op="tensor_tensor" if isinstance(other, Tensor) else "tensor_scalar",
        api=api,
        engine=DVE,
        inputs=(dst, other),
        func=opname,
        shape=dst._shape,
    )
    record(ctx, res, dst, reduction=True)
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
        for n, s in zip(reversed(a.shape), reversed(a.strides), strict=False):
            if n == 1:
                continue
            if s != expect:
                break
            run *= n
            expect *= n
        return (run * isz, max(1, t.size // run))
    # advanced: linear offsets of every point, count breaks
    assert t.src is not None and t.key is not None, "an index-array view has src and key"
    strides = [s // t.src.itemsize for s in t.src.strides]
    off: int | np.ndarray = 0
    for k, s in zip(t.key, strides, strict=False):
        off = off + (np.broadcast_to(k, t.shape) if isinstance(k, np.ndarray) else k) * s
    off = np.asarray(np.broadcast_to(off, t.shape)).ravel()
    breaks = int(np.count_nonzero(np.diff(off) != 1)) + 1
    return (max(1, t.size // breaks) * isz, breaks)


def partition_start(t: Tensor) -> int:
    """The first partition an on-chip access touches (0 for HBM)."""
    al = t.alloc
    row = al.row_bytes
    if not row or not al.buffer.on_chip:
        return 0
    if t.arr is not None:
        return t.off // row if al.par_axis == 0 else 0
    k = t.key[0] if t.key and al.par_axis == 0 else None
    if isinstance(k, np.ndarray):
        return int(k.min()) + t.off // row if k.size else 0
    return int(k) + t.off // row if k is not None else 0


def record_dma(
    ctx: RunContext,
    api: str,
    dst: Tensor,
    src: Tensor | None,
    n_elems: int,
    *,
    op: str = "dma_copy",
    rmw: bool = False,
    transpose: bool = False,
    index_reads: list | None = None,
    where: tuple | None = None,
    result: Alloc | None = None,
    seq: int | None = None,
    mask: MaskArg = None,
    more_srcs: Sequence[Tensor] = (),
) -> Event | None:
    """Record one DMA from ``src`` (None: a constant) into ``dst`` (under ``mask``, a bool array over ``dst``);
    ``more_srcs``: the other tensors it reads (``dma_compute``'s sources after the first)."""
    races = ctx.races
    if races is not None and result is not dst.alloc:
        races.note(ctx, dst, (), where, 0, mask)  # iteration races (E029)
    if not ctx.options.trace:
        return ctx.record(op, api, DMA, result=result)
    side = src if (src is not None and src.alloc.buffer in HBM_KINDS) else dst
    if side.alloc.buffer not in HBM_KINDS and src is not None:
        side = src
    contig, desc = _contiguity(side)
    onchip = dst if dst.alloc.buffer in ON_CHIP else (src if src is not None and src.alloc.buffer in ON_CHIP else dst)
    P = onchip._shape[0] if onchip._shape else 1
    isz = side.itemsize
    reads = [src.region()] if src is not None else []
    reads.extend(t.region() for t in more_srcs)
    indirect = False
    if index_reads is None:
        index_reads = []
        for t in (src, dst):  # an indirect access also reads its index tiles (core/indirect.py)
            for it in getattr(t, "index_tiles", ()):
                index_reads.append(it.region())
    elif src is not None:
        index_reads = list(index_reads)
        for it in getattr(dst, "index_tiles", ()):
            index_reads.append(it.region())
    if index_reads:
        reads.extend(index_reads)
        indirect = True
    payload = Dma(
        src.alloc.buffer if src is not None else None,
        dst.alloc.buffer,
        desc,
        contig,
        partition_start(onchip),
        indirect,
        transpose or op == "dma_transpose",
        rmw,
    )
    return ctx.record(
        op,
        api,
        DMA,
        P,
        max(1, n_elems // max(P, 1)),
        [src._shape] if src is not None else [],
        dst._shape,
        [src.alloc.dname] if src is not None else [],
        dst.alloc.dname,
        n_elems * isz,
        0,
        reads,
        [dst.region()],
        payload,
        result,
        where,
        seq,
    )


def dma_result(
    dst_shape: tuple,
    value: np.ndarray,
    src: Tensor,
    *,
    api: str,
    op: str = "dma_copy",
    rmw: bool = False,
    transpose: bool = False,
    n_elems: int | None = None,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
) -> Result:
    """The :class:`Result` of a DMA from ``src`` whose value (shape ``dst_shape``) lands later."""
    r = Result()
    r.op, r.api, r.engine = op, api, DMA
    r.info = DmaInfo(src, rmw, transpose, n_elems if n_elems is not None else math.prod(dst_shape))
    r.value, r.dtype, r.buffer, r.mask, r.shape = (
        value,
        dtype if dtype is not None else src.dtype,
        SBUF,
        mask,
        tuple(dst_shape),
    )
    r.partitions = r.free_elems = 0
    r.in_shapes, r.in_dtypes = [], []
    # the index tiles of an indirect source are read too
    r.reads = [None] + [it.region() for it in getattr(src, "index_tiles", ())]
    r.nbytes = r.out_bytes = r.flops = 0
    r.extra_reads, r.extra_writes = (), ()
    r.tile = r.where = None
    r.written_by = BY_OTHER
    r.origin = False
    r.private = False
    return r


def dma_transfer(
    ctx: RunContext,
    dst: Tensor,
    src: Tensor,
    *,
    api: str,
    mask: MaskArg = None,
    how: str | None = None,
    rmw: str | None = None,
    op: str = "dma_copy",
) -> Event | None:
    """Move src -> dst (HBM/SBUF, never PSUM) and record the DMA.  ``how``: placement rule (_fit)."""
    for arg, t in (("dst", dst), ("src", src)):
        if t.alloc.buffer is PSUM:
            raise SimTypeError(
                "E007",
                api,
                arg,
                f"Expected operand '{arg}' of '{api}' to be in address space 'hbm|sbuf', but "
                f"got a tile in 'psum' instead",
                "DMA cannot access PSUM: copy the tile to SBUF with nisa.tensor_copy first",
            )
    if how is None:
        if src.size != dst.size:
            raise SimValueError(
                "E011",
                api,
                None,
                f"DMA source {src.shape} ({src.size} elements) and destination {dst.shape} "
                f"({dst.size} elements) differ in element count",
                "Slice both sides to the same number of elements",
            )
        how = "same" if src._shape == dst._shape else "reshape"
    m = mask
    src_mask = m if (m is not None and not isinstance(m, bool) and how == "same") else None
    if m is not False:
        v = src.read(src_mask)
        if how == "reshape" and src._shape != dst._shape:
            v = np.ascontiguousarray(v).reshape(dst._shape)
        else:
            v = place(v, dst._shape, how)
        if rmw is not None:
            v = BINARY[rmw](dst.read_f32(), v.astype(np.float32))
        dst.write(v, m, api=api)
    return record_dma(ctx, api, dst, src, dst.size, op=op, rmw=rmw is not None, mask=m)
