"""NKI 0.6/0.7 kernels on the interpreter (docs/nki-0.7-spec.md §1): ``nki.jit``, ``nki.simulate``,
``nki.cpu_simulate``, LNC launches.

``@nki.jit`` kernels take HBM tensors (NumPy arrays, or CPU torch tensors) and return the
``nl.shared_hbm`` tensors they allocate.  ``kernel[lnc]`` launches on ``lnc`` logical cores
(``nl.program_id()`` is the core index).  Calling a kernel, or ``nki.simulate(kernel)(*args)``,
runs it in the interpreter; inside another kernel a jitted kernel runs inline.
"""

from __future__ import annotations

import inspect
import os
import sys
import types
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, overload

import ml_dtypes
import numpy as np

from ..core.context import RunContext, lenient, maybe_current
from ..core.errors import SimRuntimeError, SimTypeError, SimValueError
from ..core.runner import Kernel as CoreKernel
from ..core.runner import trace_kernel as _trace_kernel
from ..core.tensor import Tensor
from ..kernel_ast import analyze_kernel, with_range
from . import frontend
from .language import NKIObject, kernel_range
from .lnc import Lockstep, check_degree, env_degree
from .tensor import NkiTensor

if TYPE_CHECKING:
    from ..core.options import SimOptions
    from ..core.trace import Trace


def _to_nki(x):
    if isinstance(x, Tensor):
        return NkiTensor(x)
    if isinstance(x, tuple):
        return tuple(_to_nki(v) for v in x)
    return x


def _to_core(x):
    if isinstance(x, NkiTensor):
        return x.t
    if isinstance(x, tuple):
        return tuple(_to_core(v) for v in x)
    if isinstance(x, list):
        return [_to_core(v) for v in x]
    if isinstance(x, dict):
        return {k: _to_core(v) for k, v in x.items()}
    return x


def _check_outputs(x, inputs=()):
    """K6: returned HBM tensors must be nl.shared_hbm (or kernel arguments, K8)."""
    if isinstance(x, NkiTensor):
        b = x.t.alloc.buffer
        if b in ("hbm", "private_hbm") and x.t.alloc.id not in inputs:
            raise SimTypeError(
                "E007",
                "return",
                x.name,
                f"kernel outputs must be allocated in nl.shared_hbm, got nl.{b} (a compile error since NKI 0.3)",
                "Allocate outputs with nl.ndarray(shape, dtype, buffer=nl.shared_hbm)",
            )
    elif isinstance(x, (tuple, list)):
        for v in x:
            _check_outputs(v, inputs)
    elif isinstance(x, dict):
        for v in x.values():
            _check_outputs(v, inputs)


_RESTRICTIONS_SEEN: dict = {}  # code object -> (file, kw-only params, def line, `is` lines)


def _language_restrictions(fn, ctx: RunContext) -> None:
    """What the NKI 0.3+ compiler rejects in a kernel's own source that ``nki.simulate`` runs (aws-neuron-sdk
    81ce03ae nki/migration/index.rst "Language restrictions"): the ``*`` keyword-only separator in the kernel
    signature (E010); ``is`` / ``is not`` in the kernel function (decision: a SimWarning, E010 under strict --
    AWS's nki-library helpers still use ``is None``)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    info = _RESTRICTIONS_SEEN.get(code)
    if info is None:
        src = analyze_kernel(fn, follow_helpers=False)
        k = src.kernel if src.available else None
        info = (
            (code.co_filename, k.kwonly_params, k.span.first, k.is_lines)
            if k is not None
            else (code.co_filename, (), 0, ())
        )
        _RESTRICTIONS_SEEN[code] = info
    file, kwonly, def_line, is_lines = info
    if kwonly:
        what = (
            f"the kernel signature has keyword-only parameters ({', '.join(kwonly)}) after `*`: the NKI 0.3-0.6 "
            "specialization does not support the `*` separator in kernel signatures"
        )
        fix = (
            "Remove `*` and put the parameters with defaults last "
            "(NKI migration guide 'Remove keyword-only argument separator')"
        )
        # NKI 0.7 specializes by tracing the kernel with Python (RN 0.7.0): the 0.3 rule was the parser's; the
        # 2.33 pages do not say whether it still holds -- an error under NKI_COMPILER_FRONTEND=custom (the
        # parser), else a SimWarning, E010 under strict
        lenient(
            "nki07.kwonly_signature",
            what,
            fix,
            op="nki.jit",
            arg=kwonly[0],
            where=(file, def_line),
            error=frontend.custom(),
        )
    if is_lines:
        what = (
            "`is` / `is not` in a kernel: the NKI 0.3+ compiler does not support identity comparisons "
            "(NKI migration guide 'Replace is / is not with == / !=')"
        )
        lenient("nki07.is_operator", what, "Use == / != instead", op="is", where=(file, is_lines[0]))


_INT32 = (-(2**31), 2**31 - 1)


def _argument_problem(v, path: str) -> tuple[str, str, bool] | None:
    """What the NKI 0.3+ compiler cannot take as the kernel argument ``v`` (``path`` names it), as
    ``(what, fix, strict_only)``; None if it can.  Sources: aws-neuron-sdk 81ce03ae
    nki/get-started/nki-language-guide.rst "NKI Values" (None, bool, 32-bit int, 32-bit float, str, tensors;
    tuples, lists, dictionaries with string keys, simple user classes) and "Class Support" / "Enumerations" (a
    user class inherits from NKIObject and no other class; Enum classes are translated); nki/migration/index.rst
    (NKI 0.1 -> 0.2: "Dictionaries support only string keys")."""
    if isinstance(v, (float, np.floating)) and np.isfinite(v) and abs(float(v)) > float(np.finfo(np.float32).max):
        # sources silent on what the compiler does with it (inf, presumably): a warning, E010 under strict
        return (
            f"`{path}` = {float(v)!r} is outside the 32-bit float range of NKI values",
            "Pass a value within +-3.4e38",
            True,
        )
    if (
        v is None
        or isinstance(v, (bool, str, float, np.floating, np.ndarray, Tensor, NkiTensor, np.dtype, type, Enum))
        or callable(v)
    ):
        return None
    if isinstance(v, (int, np.integer)):
        if _INT32[0] <= int(v) <= _INT32[1]:
            return None
        # sources silent on what the compiler does with a wider int: a warning, E010 under strict
        return (
            f"`{path}` = {int(v)} does not fit a 32-bit integer, the only integer NKI values have",
            "Pass a value in the int32 range (or a float / a tensor)",
            True,
        )
    if isinstance(v, (tuple, list)):
        for i, x in enumerate(v):
            p = _argument_problem(x, f"{path}[{i}]")
            if p is not None:
                return p
        return None
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                return (
                    f"`{path}` is a dictionary with the key {k!r} ({type(k).__name__}): NKI dictionaries take "
                    "only string keys",
                    "Use string keys (str(k)) or a tuple of values",
                    False,
                )
            p = _argument_problem(x, f"{path}[{k!r}]")
            if p is not None:
                return p
        return None
    t = type(v)
    if t.__module__.split(".")[0] in ("builtins", "numpy", "ml_dtypes", "torch", "nki_kernels"):
        return None
    if isinstance(v, NKIObject):
        extra = [
            b.__name__
            for b in t.__mro__
            if b not in (t, NKIObject, object) and not issubclass(NKIObject, b) and not issubclass(b, NKIObject)
        ]
        if not extra:
            return None
        # the 0.6 parser's rule; NKI 0.7's tracing supports class inheritance (RN 0.7.0 "Specialization by Python
        # tracing"): an error only under NKI_COMPILER_FRONTEND=custom, else a SimWarning (E010 under strict)
        return (
            f"`{path}` is a {t.__name__}, whose class also inherits from {', '.join(extra)}: an NKI 0.6 class "
            "inherits from NKIObject and no other class",
            "Derive the class from nl.NKIObject only",
            not frontend.custom(),
        )
    return (
        f"`{path}` is a {t.__name__}, a class that does not inherit from nl.NKIObject: the NKI compiler "
        "takes only NKI values and NKIObject classes as arguments",
        f"Declare `class {t.__name__}(nl.NKIObject)` (a data class), or pass its fields",
        False,
    )


def _check_arguments(fn, ctx: RunContext, args, kwargs) -> None:
    """Kernel arguments the 0.3+ compiler rejects but ``nki.simulate`` runs (E010, at the kernel's def line)."""
    code = getattr(fn, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code is not None else None
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    items = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    for name, v in items:
        p = _argument_problem(v, name)
        if p is None:
            continue
        what, fix, lenient_rule = p
        if lenient_rule:
            lenient("nki07.argument_value", what, fix, op="nki.jit", arg=name, where=where)
            continue
        raise SimTypeError("E010", "nki.jit", name, what, fix, where=where)


class Kernel(CoreKernel):
    """An NKI 0.7 kernel.  ``.func`` is the host-side entry the op core runs (it converts the core's
    HBM tensors to :class:`NkiTensor` and back); ``.kernel_fn`` is the user's function.  Policies:
    core tensors wrapped as NkiTensors; SBUF/PSUM overflow is a warning (an error under strict:
    docs/nki-0.7-spec.md "Decisions"); array arguments may be written and are filled in place
    (K8); the instances of an LNC launch run in lockstep (lnc.py)."""

    tensor_cls = Tensor

    def __init__(self, fn: Callable, grid: tuple[int, ...] = (), **options: Any):
        self.kernel_fn = fn
        self.lnc_explicit = bool(grid)  # launched as kernel[n] (K4), else the environment's degree (K10)

        # the kernel function's `range` loops may run as loop programs (language.kernel_range)
        body = with_range(fn, kernel_range) if isinstance(fn, types.FunctionType) else fn

        def entry(*args, **kwargs):
            inputs = {a.alloc.id for a in list(args) + list(kwargs.values()) if isinstance(a, Tensor)}
            args = [_to_nki(a) for a in args]
            kwargs = {k: _to_nki(v) for k, v in kwargs.items()}
            out = body(*args, **kwargs)
            _check_outputs(out, inputs)
            return _to_core(out)

        entry.__name__ = getattr(fn, "__name__", "kernel")
        entry.__wrapped__ = fn  # type: ignore[attr-defined]  # a function attribute: mypy does not model them
        super().__init__(entry, grid=tuple(grid) or (1,), **options)
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", None)  # type: ignore[assignment]  # None as update_wrapper
        self.__wrapped__ = fn

    def writes_back(self) -> bool:
        # K8: kernel arguments are HBM tensors a kernel may write; "Input arrays are updated in-place if
        # the kernel modified the corresponding HBM tensors" (aws-neuron-sdk 81ce03ae
        # nki/guides/nki_simulator.rst, "Execution")
        return True

    def run_instances(self, ctx: RunContext, points: list, args: list, kwargs: dict) -> Any:
        _language_restrictions(self.kernel_fn, ctx)
        _check_arguments(self.kernel_fn, ctx, args, kwargs)
        if len(points) == 1:
            ctx.program_id, ctx.hbm_cursor = points[0], 0
            return self.func(*args, **kwargs)
        return Lockstep(ctx, points).run(self.func, args, kwargs)[0]

    def __getitem__(self, lnc: int | tuple[int, ...]) -> Kernel:
        if maybe_current() is not None:
            raise SimRuntimeError(
                "E019",
                "kernel[lnc]",
                None,
                "a kernel launch with an LNC/grid cannot be nested",
                "Call sub-kernels as plain functions",
            )
        g = lnc if isinstance(lnc, tuple) else (lnc,)
        try:
            g = tuple(int(x) for x in g)
        except (TypeError, ValueError):
            raise SimValueError("E011", "kernel[lnc]", "lnc", f"expected an int LNC degree, got {lnc!r}") from None
        if not g or any(x < 1 for x in g):
            raise SimValueError("E011", "kernel[lnc]", "lnc", f"the LNC degree must be >= 1, got {lnc!r}")
        k = Kernel(self.kernel_fn, grid=g, **self.options)
        k.skip_middle_end = self.skip_middle_end
        return k

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            return self.kernel_fn(*args, **kwargs)  # K5: inline, with NkiTensor arguments
        return simulate(self)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<nki 0.7 kernel {self.__name__}[{self.grid[0] if len(self.grid) == 1 else self.grid}]>"


@overload
def jit(fn: None = None, **kwargs: Any) -> Callable[[Callable], Kernel]: ...
@overload
def jit(fn: Callable, **kwargs: Any) -> Kernel: ...


def jit(fn: Callable | None = None, **kwargs: Any) -> Kernel | Callable[[Callable], Kernel]:
    """``@nki.jit`` / ``@nki.jit(...)`` (K1).  ``mode=`` is ignored; ``platform_target=`` is an error."""
    if "platform_target" in kwargs:
        raise SimTypeError(
            "E010",
            "nki.jit",
            "platform_target",
            "platform_target was removed in NKI 0.3",
            "Set NEURON_PLATFORM_TARGET_OVERRIDE instead",
        )
    kwargs.pop("mode", None)
    if fn is None:
        return lambda f: jit(f, **kwargs)
    if isinstance(fn, Kernel):
        return fn
    if isinstance(fn, CoreKernel):  # an NKI 0.1 kernel object: re-wrap its function
        fn = fn.func
    return Kernel(fn)


def _torch():
    return sys.modules.get("torch")


def _from_host(a, name):
    t = _torch()
    if t is not None and isinstance(a, t.Tensor):
        if a.device.type != "cpu":
            raise SimTypeError(
                "E007",
                "nki.simulate",
                name,
                f"tensor on device {a.device}",
                "Pass CPU tensors (or NumPy arrays) to the simulator",
            )
        a = a.detach()
        if a.dtype == t.bfloat16:
            return a.float().numpy().astype(ml_dtypes.bfloat16), True
        return a.numpy(), True
    if isinstance(a, list):
        raise SimTypeError(
            "E010", "nki.simulate", name, "list kernel arguments are not supported (NKI 0.3)", "Pass a tuple instead"
        )
    return a, False


def _to_torch(x):
    t = _torch()
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "V" or x.dtype.name in ("bfloat16",) or "float8" in x.dtype.name:
            r = t.from_numpy(x.astype(np.float32))
            return r.to(t.bfloat16) if x.dtype.name == "bfloat16" else r
        return t.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, tuple):
        return tuple(_to_torch(v) for v in x)
    if isinstance(x, list):
        return [_to_torch(v) for v in x]
    if isinstance(x, dict):
        return {k: _to_torch(v) for k, v in x.items()}
    return x


def _launch(k: Kernel) -> Kernel:
    """The launch of ``k`` (K10, K11): a kernel called without brackets runs on the LNC degree
    ``NEURON_LOGICAL_NC_CONFIG`` gives (1 when unset); the degree must match the one the environment gives
    neuronx-cc."""
    if len(k.grid) != 1:
        return k  # a multi-axis SPMD grid, not an LNC degree
    if k.lnc_explicit:
        check_degree(k.__name__, k.grid[0], f"{k.__name__}[{k.grid[0]}]")
        return k
    env = env_degree()
    degree = k.grid[0] if env is None else env
    check_degree(k.__name__, degree, "NEURON_LOGICAL_NC_CONFIG" if env is not None else "no brackets: LNC=1")
    if degree != k.grid[0]:
        run = k[degree]
        run.lnc_explicit = False
        return run
    return k


def simulate(kernel: Callable, options: SimOptions | None = None) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*args)`` (K2): run on the interpreter; NumPy in/out, or torch in/out."""
    k = kernel if isinstance(kernel, Kernel) else jit(kernel)

    def run(*args, **kwargs):
        conv, torch_in = [], False
        for i, a in enumerate(args):
            v, was = _from_host(a, f"arg{i}")
            conv.append(v)
            torch_in |= was
        kw = {}
        for n, a in kwargs.items():
            v, was = _from_host(a, n)
            kw[n] = v
            torch_in |= was
        out = _trace_kernel(_launch(k), *conv, options=options, **kw)[0]
        return _to_torch(out) if torch_in else out

    run.__name__ = f"simulate({k.__name__})"
    return run


class _CpuSimulate:
    """``nki.cpu_simulate(kernel)[lnc](**inputs)``: the form nki-library's test harness calls."""

    def __init__(self, kernel):
        self.kernel = kernel if isinstance(kernel, Kernel) else jit(kernel)

    def __getitem__(self, lnc):
        return simulate(self.kernel[lnc])

    def __call__(self, *args, **kwargs):
        return simulate(self.kernel)(*args, **kwargs)


cpu_simulate = _CpuSimulate
dtype = np.dtype  # ``nki.dtype`` in annotations: NKI dtypes are NumPy dtype objects here


def trace(kernel: Callable, *args: Any, options: SimOptions | None = None, **kwargs: Any) -> tuple[Any, Trace]:
    """``(outputs, trace)`` of a run: the instruction trace the cost model reads."""
    k = kernel if isinstance(kernel, Kernel) else jit(kernel)
    return _trace_kernel(_launch(k), *args, options=options, **kwargs)


def simulator_requested() -> bool:
    """K3: ``NKI_SIMULATOR=1`` asks every ``@nki.jit`` call to run on the simulator."""
    return os.environ.get("NKI_SIMULATOR", "").strip().lower() in ("1", "true", "yes", "on")


def skip_middle_end_transformations(kernel: Callable) -> Kernel:
    """A compiler flag: ``affine_range`` runs in program order (never shuffled)."""
    k = jit(kernel)
    k.skip_middle_end = True
    return k
