"""The NKI 0.1 calling convention over the op core: value-returning calls (:func:`returns_fresh`) and
the few instructions that take their destination as an argument (:func:`with_dst`).

A value-returning call runs the core op with ``dst=PENDING``: the result is a new tile whose event
waits for its destination (``core/ops.py``): ``t[...] = r`` or ``psum += r`` land it in ``t``, the next
NKI call that issues an instruction records it with the new tile as its destination.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..core import engines
from ..core.context import enter
from ..core.enums import names_engine
from ..core.errors import SimError, SimValueError
from ..core.ops import PENDING
from .indexing import mask_value


def shape_error(api: str, e: ValueError) -> ValueError:
    """A NumPy shape error that escaped an op's validation (e.g. "operands could not be broadcast together
    with remapped shapes") as the coded E011 it is; coded errors pass through unchanged."""
    if isinstance(e, SimError) or "shape" not in str(e) and "broadcast" not in str(e):
        return e
    return SimValueError(
        "E011",
        api,
        None,
        f"operand, mask or destination shapes do not line up ({e})",
        "Check that the operands, the mask and the destination have matching shapes "
        "(a (P, 1) column broadcasts along free axes only)",
    )


def _params(fn: Callable) -> frozenset:
    return frozenset(list(inspect.signature(fn).parameters)[2:])  # after (ctx, dst)


def _kwargs(kw: dict, known: frozenset, short: str, engine_param: bool) -> dict:
    """NKI 0.1 keyword arguments as the core takes them: ``engine=`` only where the 2.26 signature
    has it (E025), ``mask=`` predicates as bool arrays, other unknown keywords ignored (as the SDK
    2.26 signatures' ``**kwargs``)."""
    if "engine" in kw and not engine_param:
        engines.no_engine_parameter(short, kw)
    out = {}
    for k, v in kw.items():
        if k == "mask":
            out[k] = mask_value(v, short)
        elif k in known:
            out[k] = v
    return out


def returns_fresh(
    core_fn: Callable,
    *,
    name: str | None = None,
    api: str | None = None,
    pre: tuple = (),
    convert: Callable | None = None,
    engine_param: bool = False,
    **bound: Any,
) -> Callable:
    """An NKI 0.1 call that returns its result as a new tile: ``core_fn(ctx, PENDING, *pre, *args)``.
    ``name``: the call's name in messages (default the core op's); ``api``: the event's api
    (default ``nisa.<name>``); ``convert(*args, **kw) -> (args, kw)``: maps the 0.1 signature onto
    the core op's; ``bound``: keyword defaults of this call."""
    short = name or core_fn.__name__
    known = _params(core_fn)
    if "api" in known:
        bound = dict(bound, api=api or f"nisa.{short}")

    def call(*args, **kw):
        ctx = enter(short)
        if kw:
            kw = _kwargs(kw, known, short, engine_param)
            ctx.engine_given = names_engine(kw)
            if bound:
                kw = {**bound, **kw}
        else:
            kw = bound
        if convert is not None:
            args, kw = convert(*args, **kw)
        try:
            out = core_fn(ctx, PENDING, *pre, *args, **kw)
        except ValueError as e:
            err = shape_error(short, e)
            if err is e:
                raise
            raise err from None
        if ctx.recorder is not None:  # a loop body being traced (core/program.py)
            ctx.recorder.call(core_fn, PENDING, (*pre, *args), kw, out)
        return out

    call.__name__ = call.__qualname__ = short
    call.__doc__ = core_fn.__doc__
    call.core_op = core_fn  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
    return call


def with_dst(
    core_fn: Callable,
    *,
    name: str | None = None,
    api: str | None = None,
    convert: Callable | None = None,
    engine_param: bool = False,
    **bound: Any,
) -> Callable:
    """An NKI 0.1 call that writes its ``dst`` argument (keyword, or the first positional argument)
    and returns None; ``convert(*args, **kw) -> (dst, args, kw)`` maps other signatures."""
    short = name or core_fn.__name__
    known = _params(core_fn) | {"dst"}
    if "api" in known:
        bound = dict(bound, api=api or f"nisa.{short}")

    def call(*args, **kw):
        ctx = enter(short)
        if kw:
            kw = _kwargs(kw, known, short, engine_param)
            ctx.engine_given = names_engine(kw)
        for k, v in bound.items():
            kw.setdefault(k, v)
        if convert is not None:
            dst, args, kw = convert(*args, **kw)
        elif "dst" in kw:
            dst = kw.pop("dst")
        else:
            dst, args = args[0], args[1:]
        try:
            core_fn(ctx, dst, *args, **kw)
        except ValueError as e:
            err = shape_error(short, e)
            if err is e:
                raise
            raise err from None
        if ctx.recorder is not None:  # a loop body being traced (core/program.py)
            ctx.recorder.call(core_fn, dst, args, kw, None)

    call.__name__ = call.__qualname__ = short
    call.__doc__ = core_fn.__doc__
    call.core_op = core_fn  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
    return call
