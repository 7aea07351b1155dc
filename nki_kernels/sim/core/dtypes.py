"""NKI dtypes, type promotion and rounding at the destination dtype (spec §3, §5).

NKI dtypes are NumPy dtype objects (bf16/fp8 through ml_dtypes), except ``tfloat32``,
which has no NumPy type: it is stored as float32 with the low 13 mantissa bits rounded
away (1-8-10) in "hw" precision.  Compute is always fp32 (VectorE/ScalarE/GpSimdE cast
inputs to fp32; TensorE accumulates in fp32); a result is rounded once, where it is
written.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .errors import SimValueError

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
# nl.float8_e4m3 is ml_dtypes' IEEE-like float8_e4m3 (max 240, has inf), as the 2.26 language doc
# defines it (aws-neuron-sdk 49ee15c5 general/nki/api/nki.api.shared.rst dtype table).
# OCP E4M3FN (max 448, no inf) is a different type and is not an NKI dtype.
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
int8, uint8 = np.dtype(np.int8), np.dtype(np.uint8)
int16, uint16 = np.dtype(np.int16), np.dtype(np.uint16)
int32, uint32 = np.dtype(np.int32), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)


class _TF32:
    """Marker for nl.tfloat32 (stored as float32)."""

    name = "tfloat32"
    itemsize = 4
    kind = "f"

    def __repr__(self):
        return "tfloat32"

    def __reduce__(self):
        return "tfloat32"


tfloat32 = _TF32()

FLOATS = (float32, float16, bfloat16, float8_e4m3, float8_e5m2)
INTS = (int8, uint8, int16, uint16, int32, uint32)
ALL = FLOATS + INTS + (bool_, tfloat32)
_LOW_PRECISION = (bfloat16, float8_e4m3, float8_e5m2)

_BY_NAME = {
    "float32": float32,
    "fp32": float32,
    "float16": float16,
    "fp16": float16,
    "bfloat16": bfloat16,
    "bf16": bfloat16,
    "float8_e4m3": float8_e4m3,
    "float8_e5m2": float8_e5m2,
    "tfloat32": tfloat32,
    "int8": int8,
    "uint8": uint8,
    "int16": int16,
    "uint16": uint16,
    "int32": int32,
    "uint32": uint32,
    "bool": bool_,
    "bool_": bool_,
}


_NAMES: dict = {}


def name_of(dt: np.dtype | _TF32) -> str:
    n = _NAMES.get(dt)
    if n is None:
        if isinstance(dt, _TF32):
            n = "tfloat32"
        elif dt == float8_e4m3:
            n = "float8_e4m3"
        else:
            n = np.dtype(dt).name
        _NAMES[dt] = n
    return n


_INFO: dict[np.dtype | _TF32, tuple[int, str]] = {}


def info(dt: np.dtype | _TF32) -> tuple[int, str]:
    """(itemsize, name) of an NKI dtype, cached (np.dtype() calls are slow on the hot path)."""
    r = _INFO.get(dt)
    if r is None:
        r = _INFO[dt] = (itemsize(dt), name_of(dt))
    return r


_STORAGE: dict = {}


def canonical(dt: Any, *, op: str = "dtype", arg: str = "dtype") -> np.dtype | _TF32:
    """Map whatever a user passes as a dtype to an NKI dtype, or raise E018."""
    if dt is tfloat32 or isinstance(dt, _TF32):
        return tfloat32
    if isinstance(dt, str):
        if dt in _BY_NAME:
            return _BY_NAME[dt]
    else:
        try:
            d = np.dtype(dt)
        except TypeError:
            d = None
        if d is not None:
            if d == np.float64:
                raise SimValueError(
                    "E018",
                    op,
                    arg,
                    "Unsupported dtype 'float64': NKI has no 64-bit types",
                    "Convert inputs with .astype(np.float32) before calling the kernel",
                )
            if d == np.int64 or d == np.uint64:
                raise SimValueError(
                    "E018",
                    op,
                    arg,
                    f"Unsupported dtype '{d}': the interpreter has no 64-bit tensors (NKI 0.1 has none; the nl.int64 "
                    "scalar tiles of NKI 0.7 are not modelled)",
                    "Use int32/uint32",
                )
            if d.kind == "V" and d.itemsize == 4:
                return tfloat32
            for a in FLOATS + INTS + (bool_,):
                if d == a:
                    return a
    allowed = ", ".join(sorted(set(name_of(a) for a in ALL)))
    raise SimValueError("E018", op, arg, f"Unsupported dtype '{dt}'", f"Expected one of: {allowed}")


def is_float(dt: np.dtype | _TF32) -> bool:
    # ml_dtypes' bfloat16/float8 report kind 'V', so test membership, not .kind
    return dt is tfloat32 or dt in FLOATS


def is_int(dt: np.dtype | _TF32) -> bool:
    return not isinstance(dt, _TF32) and dt not in FLOATS and np.dtype(dt).kind in "iub"


def itemsize(dt: np.dtype | _TF32) -> int:
    return 4 if isinstance(dt, _TF32) else np.dtype(dt).itemsize


def storage_dtype(dt: np.dtype | _TF32, precision: str) -> np.dtype:
    """The NumPy dtype an array of NKI dtype ``dt`` is stored in."""
    r = _STORAGE.get((dt, precision))
    if r is None:
        r = _STORAGE[(dt, precision)] = _storage_dtype(dt, precision)
    return r


def _storage_dtype(dt, precision: str) -> np.dtype:
    if dt is tfloat32:
        return float32
    if precision == "compat" and dt in _LOW_PRECISION:
        return float32
    return np.dtype(dt)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """Round fp32 values to tfloat32 (10 mantissa bits), round-to-nearest-even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    lsb = (b >> 13) & 1
    r = ((b + 0x0FFF + lsb) & np.uint32(0xFFFFE000)).astype(np.uint32)
    finite = np.isfinite(x)
    return np.where(finite, r.view(np.float32), x)


def cast_into(dst: np.ndarray, value: Any, nki_dtype: np.dtype | _TF32, where: np.ndarray | None = None) -> None:
    """Write ``value`` into storage array ``dst`` rounding once to ``nki_dtype``.

    Float->int casts truncate toward zero (golden values of the SDK 2.26 ``nki/test`` examples)
    and saturate at the integer range (README divergences)."""
    v = value
    if nki_dtype is tfloat32:
        v = _round_tf32(np.asarray(v, dtype=np.float32))
    elif dst.dtype.kind in "iu" and np.asarray(v).dtype.kind not in "iub":
        info = np.iinfo(dst.dtype)
        v = np.clip(np.trunc(v), info.min, info.max)
    elif dst.dtype == np.bool_:
        v = np.asarray(v) != 0
    if where is None:
        np.copyto(dst, v, casting="unsafe")
    else:
        np.copyto(dst, v, casting="unsafe", where=where)


# Poison: the value of memory nobody wrote.  Floats get a quiet NaN with a recognisable payload,
# so that the first read of never-written memory can be told apart from a NaN a kernel computed
# (poison provenance); fp8 has no room for a payload (plain NaN, not detected).
_POISON_BITS = {
    np.dtype(np.float32): (np.uint32, 0x7FC0DEAD),
    np.dtype(np.float16): (np.uint16, 0x7EAD),
    bfloat16: (np.uint16, 0x7FAD),
}


def poison_fill(shape: tuple[int, ...], nki_dtype: np.dtype | _TF32, storage: np.dtype) -> np.ndarray:
    """A new array of ``shape`` holding the poison value of ``nki_dtype`` in ``storage`` dtype."""
    pb = _POISON_BITS.get(storage)
    if pb is not None:
        return np.full(shape, pb[1], dtype=pb[0]).view(storage)
    return np.full(shape, poison_value(nki_dtype), dtype=storage)


def poison_mask(a: np.ndarray) -> np.ndarray | None:
    """Boolean array: which elements of ``a`` hold the (detectable) poison pattern; None if the
    dtype cannot carry it (ints, fp8)."""
    pb = _POISON_BITS.get(a.dtype)
    if pb is None:
        return None
    return a.view(pb[0]) == pb[1]


def poison_value(dt: np.dtype | _TF32) -> float | bool | int:
    if is_float(dt):
        return np.nan
    assert not isinstance(dt, _TF32), "tfloat32 is a float dtype"
    if np.dtype(dt) == np.bool_:
        return True
    return np.iinfo(np.dtype(dt)).max


# ---- promotion (spec §5 "nl.* type promotion") -------------------------------------------

_FLOAT_RANK = {float8_e4m3: 0, float8_e5m2: 0, bfloat16: 1, float16: 1, float32: 2}


def promote(a: np.dtype | _TF32 | None, b: np.dtype | _TF32 | None) -> np.dtype | _TF32:
    """Promote two NKI dtypes (None = weak Python scalar: float -> fp32, int -> int32)."""
    if a is b and a is not None and a is not tfloat32:
        return a
    if a is None:
        a, b = b, a
    if a is None:
        return float32
    if b is None:
        return a
    if isinstance(a, _TF32) or isinstance(b, _TF32):
        return float32
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        ra, rb = _FLOAT_RANK[a], _FLOAT_RANK[b]
        if ra == rb:  # fp16+bf16 -> fp32; e4m3+e5m2 -> bf16
            return float32 if ra == 1 else bfloat16
        return a if ra > rb else b
    # ints
    if a == bool_:
        return b
    if b == bool_:
        return a
    r = np.promote_types(a, b)
    if r.itemsize > 4:
        return float32 if r.kind == "i" else uint32
    return r


def scalar_dtype(x: Any) -> np.dtype | _TF32 | None:
    """NKI dtype of a scalar operand: typed NumPy scalars keep their type, Python ones are weak."""
    if isinstance(x, (bool, np.bool_)):
        return uint8
    if isinstance(x, np.generic):
        try:
            return canonical(x.dtype)
        except Exception:
            return None
    if isinstance(x, float):
        return float32
    if isinstance(x, int):
        return int32
    return None
