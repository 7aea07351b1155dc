"""The NKI 0.7 calling convention over the op core: ``dst``-first ISA calls that return nothing
(:func:`dst_first`, docs/nki-0.7-spec.md I1) and the ``nl.*`` calls that return a new tile
(:func:`returns_fresh`); tensors cross the boundary as :class:`~.tensor.NkiTensor` wrappers.
Documented names that are not modelled are importable and raise E100 when used
(:class:`Unimplemented`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NoReturn

from ..core.context import enter
from ..core.dtypes import canonical, name_of
from ..core.enums import names_engine
from ..core.errors import SimTypeError, not_implemented
from ..core.ops import PENDING
from ..core.ops import _partition_access as partition_access
from ..core.tensor import ON_CHIP, Tensor
from .tensor import NkiTensor

# core-op parameters that are not part of the NKI 0.7 signatures (mask= was removed in NKI 0.2: MIG)
_NOT_07 = frozenset(("mask", "api", "spec", "default_engine", "warn_non_matmul_init", "dtype", "name"))


def _params(fn: Callable) -> frozenset:
    return frozenset(list(inspect.signature(fn).parameters)[2:]) - _NOT_07  # after (ctx, dst)


def unwrap(x: Any) -> Any:
    """An NkiTensor's core tensor; tuples and lists element-wise; anything else unchanged."""
    c = x.__class__
    if c is NkiTensor:
        return x.t
    if c is tuple or c is list:
        return c(unwrap(v) for v in x)
    return x


def _kwargs(kw: dict, known: frozenset, short: str, dst: Tensor | None) -> dict:
    """Keyword arguments of an NKI 0.7 call: ``name=`` accepted, ``dtype=`` only when it equals
    ``dst.dtype`` (the nki-samples matmul tutorial passes it), anything the 0.7 signature lacks is
    E010 (e.g. the removed ``mask=``)."""
    out = {}
    bad = []
    for k, v in kw.items():
        if k == "name":
            continue
        if k == "dtype" and dst is not None:
            if v is not None and canonical(v, op=short) != dst.dtype:
                raise SimTypeError(
                    "E009",
                    short,
                    "dtype",
                    f"dtype={name_of(canonical(v, op=short))} differs from dst.dtype={name_of(dst.dtype)}",
                    "The result is cast to dst.dtype; drop dtype=",
                )
            continue
        if k in known:
            out[k] = v.t if v.__class__ is NkiTensor else unwrap(v)
        else:
            bad.append(k)
    if bad:
        raise SimTypeError(
            "E010",
            short,
            bad[0],
            f"unexpected keyword argument(s) {sorted(bad)}",
            "See the nki.isa API reference for this instruction's parameters",
        )
    return out


def dst_first(
    core_fn: Callable,
    *,
    name: str | None = None,
    api: str | None = None,
    convert: Callable | None = None,
    extra: tuple = (),
    defaults: dict | None = None,
    dst_name: str = "dst",
    **bound: Any,
) -> Callable:
    """An NKI 0.7 ISA call ``op(dst, ...)``: the core op lands its result in ``dst``; returns None.
    ``dst_name``: the destination's keyword in the 0.7 signature (``topk`` calls it ``val_dst``).
    ``convert(dst, *args, **kw) -> (args, kw)`` maps the 0.7 signature onto the core op's (``extra``:
    keyword names it takes besides the core op's); ``defaults``: the 0.7 signature's defaults where
    they differ from the core op's; ``bound``: fixed keyword arguments of this call (e.g. the
    documented semantics ``spec="0.6"``)."""
    short = name or core_fn.__name__
    known = _params(core_fn) | frozenset(extra)
    sig = list(inspect.signature(core_fn).parameters.values())[2:]
    required = (
        tuple(p.name for p in sig if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD)
        if convert is None
        else ()
    )
    fixed = dict(bound)
    if "api" in inspect.signature(core_fn).parameters:
        fixed["api"] = api or f"nisa.{short}"
    position = {p.name: i for i, p in enumerate(sig)}
    positioned = tuple((k, v, position[k]) for k, v in (defaults or {}).items())
    engine_dst = not core_fn.__module__.endswith(".dma")  # DMAs write any partition

    def call(*args, **kw):
        ctx = enter(short)
        if dst_name in kw:
            dst = kw.pop(dst_name)
        elif args:
            dst, args = args[0], args[1:]
        else:
            raise SimTypeError(
                "E010",
                short,
                dst_name,
                f"nisa.{short}() was called without {dst_name}: NKI 0.7 ISA calls "
                "write their result into a destination tile and return nothing",
                f'Pass the destination first: nisa.{short}({dst_name}=tile, ...) (NKI 0.6 MIG "All ISA '
                'functions require a destination parameter")',
            )
        if dst.__class__ is not NkiTensor:
            raise SimTypeError(
                "E010",
                short,
                dst_name,
                f"expected a destination tensor, got {type(dst).__name__}",
                f"ISA calls take dst first since NKI 0.2: nisa.{short}(dst, ...) returns nothing",
            )
        d = dst.t
        if engine_dst and not d.access_ok and d.alloc.buffer in ON_CHIP:
            # the engines' partition rules hold for what they write too (NKI 0.6 trainium2 arch guide: an
            # access of P partitions starts at partition 0 (P > 64), 0/64 (P > 32) or 0/32/64/96): E026
            partition_access(d, short, dst_name)
            d.access_ok = True
        kw = _kwargs(kw, known, short, d) if kw else {}
        if kw:
            ctx.engine_given = names_engine(kw)
        if args:
            args = tuple(a.t if a.__class__ is NkiTensor else unwrap(a) for a in args)
        if len(args) < len(required):
            missing = [n for n in required[len(args) :] if n not in kw]
            if missing:
                raise SimTypeError(
                    "E010",
                    short,
                    missing[0],
                    f"nisa.{short}() is missing argument(s) {missing}",
                    f"Call nisa.{short}(dst, {', '.join(required)}, ...) (NKI 0.6 nki.isa reference)",
                )
        for k, v, i in positioned:
            if k not in kw and i >= len(args):
                kw[k] = v
        if convert is not None:
            args, kw = convert(d, *args, **kw)
        kw.update(fixed)
        core_fn(ctx, d, *args, **kw)
        if ctx.recorder is not None:  # a loop body being traced (core/program.py)
            ctx.recorder.call(core_fn, d, args, kw, None)

    call.__name__ = call.__qualname__ = short
    call.__doc__ = core_fn.__doc__
    call.core_op = core_fn  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
    return call


def returns_fresh(
    core_fn: Callable,
    *,
    name: str | None = None,
    api: str | None = None,
    pre: tuple = (),
    convert: Callable | None = None,
    **bound: Any,
) -> Callable:
    """An ``nl.*`` call of NKI 0.7 that returns a new tile (NKI 0.6 L1): ``core_fn(ctx, PENDING, *pre,
    ...)`` wrapped as an NkiTensor (``t[...] = nl.exp(x)`` lands the result in ``t``)."""
    short = name or core_fn.__name__
    fixed = dict(bound)
    if "api" in inspect.signature(core_fn).parameters:
        fixed["api"] = api or f"nl.{short}"

    def call(*args, **kw):
        ctx = enter(short)
        if args:
            args = tuple(a.t if a.__class__ is NkiTensor else unwrap(a) for a in args)
        if kw:
            kw.pop("name", None)
            kw = {k: (v.t if v.__class__ is NkiTensor else v) for k, v in kw.items()}
        if convert is not None:
            args, kw = convert(*args, **kw)
        kw.update(fixed)
        r = core_fn(ctx, PENDING, *pre, *args, **kw)
        if ctx.recorder is not None:  # a loop body being traced (core/program.py)
            ctx.recorder.call(core_fn, PENDING, (*pre, *args), kw, r)
        return NkiTensor(r) if isinstance(r, Tensor) else r

    call.__name__ = call.__qualname__ = short
    call.__doc__ = core_fn.__doc__
    call.core_op = core_fn  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
    return call


class Unimplemented:
    """Stands for a documented NKI name the interpreter does not implement: importing it works
    (``from nki.isa import sendrecv`` at module level), using it raises E100."""

    def __init__(self, api: str):
        self._api = api

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise not_implemented(self._api)

    def __getattr__(self, name: str) -> Unimplemented:
        if name.startswith("_"):  # introspection (pytest, inspect, copy) must see a plain object
            raise AttributeError(name)
        return Unimplemented(f"{self._api}.{name}")

    def __getitem__(self, item: Any) -> NoReturn:
        raise not_implemented(self._api)

    def __repr__(self) -> str:
        return f"<not implemented in nki_kernels.sim: {self._api}>"


def module_getattr(prefix: str) -> Callable:
    """A module ``__getattr__`` for an NKI 0.7 namespace: unknown public names are Unimplemented."""

    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(name)
        return Unimplemented(f"{prefix}.{name}")

    return __getattr__
