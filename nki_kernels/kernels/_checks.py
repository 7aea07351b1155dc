"""Argument checks shared by the kernels: run at the top of each kernel, before any
instruction, under both backends (they only read ``.shape``/``.dtype``), and raise a
ValueError naming the argument, what was given and what is allowed."""

from __future__ import annotations

from typing import Any, NoReturn

from nki_kernels.backend import nl
from nki_kernels.kernels.registry import dtype_name

FLOAT_DTYPES = {"float32": nl.float32, "float16": nl.float16, "bfloat16": nl.bfloat16}


def fail(kernel: str, arg: str, got: object, allowed: str) -> NoReturn:
    raise ValueError(f"{kernel}({arg}): got {got}; allowed: {allowed}")


def check_tensor(kernel: str, arg: str, t: Any, layout: str) -> None:
    """A kernel input must be an array (an HBM tensor on the device): a list, a float or None
    gets the same ValueError as a wrong shape, not an AttributeError from deep inside."""
    if not (hasattr(t, "shape") and hasattr(t, "dtype")):
        fail(
            kernel,
            arg,
            f"{t!r:.60} of type {type(t).__name__}",
            f"an array of shape {layout} (a NumPy array, or an HBM tensor on the device)",
        )


def check_rank(kernel: str, arg: str, t: Any, rank: int, layout: str) -> tuple:
    check_tensor(kernel, arg, t, layout)
    shape = tuple(t.shape)
    if len(shape) != rank:
        fail(kernel, arg, f"shape {shape} (rank {len(shape)})", f"rank {rank} {layout}")
    if any(int(s) < 1 for s in shape):
        fail(kernel, arg, f"shape {shape} with an empty dimension", f"every dimension >= 1 ({layout})")
    return tuple(int(s) for s in shape)


def check_float(kernel: str, arg: str, t: Any) -> str:
    name = dtype_name(t.dtype)
    if name not in FLOAT_DTYPES:
        fail(kernel, arg, f"dtype {t.dtype}", "float32, float16 or bfloat16")
    return name


def check_same_dtype(kernel: str, args: dict) -> None:
    names = {k: dtype_name(v.dtype) for k, v in args.items()}
    if len(set(names.values())) > 1:
        fail(
            kernel,
            ", ".join(names),
            "dtypes " + ", ".join(f"{k}={v}" for k, v in names.items()),
            "all inputs in one dtype",
        )
