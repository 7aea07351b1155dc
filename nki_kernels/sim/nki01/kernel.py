"""NKI 0.1 kernels: ``nki.jit`` (:class:`Kernel`), ``simulate_kernel`` / ``trace_kernel``, SPMD grids,
the device-only stubs ``baremetal`` / ``benchmark`` / ``profile`` (spec §2)."""

from __future__ import annotations

import copy as _copy
import inspect
from collections.abc import Callable
from typing import Any

from .. import kernel_ast as _kernel_ast
from ..core.annotations import Annotation
from ..core.context import RunContext, maybe_current
from ..core.errors import NKISyntaxError, SimValueError, needs_device
from ..core.options import SimOptions
from ..core.races import RaceLog as _RaceLog
from ..core.runner import Kernel as _CoreKernel
from ..core.runner import _ReturnSite
from ..core.runner import trace_kernel as _trace_kernel
from ..core.tensor import Tensor
from . import scopes as _scopes
from . import symbolic as _symbolic
from .allocation import DirectAllocation
from .language import kernel_range
from .tile import Tile


def _def_line(func) -> tuple[str, int]:
    """(file, line) of a function's ``def`` statement (below its decorators)."""
    code = getattr(func, "__code__", None)
    if code is None:
        return ("<kernel>", 0)
    try:
        src, first = inspect.getsourcelines(func)
    except (OSError, TypeError):
        return (code.co_filename, code.co_firstlineno)
    for i, line in enumerate(src):
        if line.lstrip().startswith(("def ", "async def ")):
            return (code.co_filename, first + i)
    return (code.co_filename, code.co_firstlineno)


class Kernel(_CoreKernel):
    """An NKI 0.1 jitted kernel (``nki.jit``): its tensors are :class:`~.tile.Tile` views; array
    arguments are immutable inputs unless annotated ``nt.mutable_tensor`` (``nki.trace`` kernels write
    theirs, copied back); the instances of an SPMD grid run one after the other."""

    tensor_cls = Tile
    stack_allocator = False  # @ncc.enable_stack_allocator
    force_auto_alloc = False  # @ncc.force_auto_alloc

    def run_instances(self, ctx: RunContext, points: list, args: list, kwargs: dict) -> Any:
        """Run the grid, the kernel function traced (:meth:`traced`), with the direct-allocation rules
        (nki01/allocation.py) watching the run."""
        if self.stack_allocator and not self.skip_middle_end:
            # CMP enable_stack_allocator (SDK 2.26 nki/compiler/__init__.py): "Must use together with
            # skip_middle_end_transformations"
            raise NKISyntaxError(
                "E030",
                "nki.compiler.enable_stack_allocator",
                None,
                "enable_stack_allocator must be used together with skip_middle_end_transformations",
                "Add @nki.compiler.skip_middle_end_transformations below it",
                where=_def_line(self.func),
            )
        ctx.direct = direct = DirectAllocation(forced_auto=self.force_auto_alloc)
        k = _copy.copy(self)
        k.func = self.traced()  # its `range` loops are symbolic (docs/nki-0.1-rules.md section 9)
        result = _CoreKernel.run_instances(k, ctx, points, args, kwargs)
        direct.finish(result)
        return result

    def traced(self) -> Callable:
        """The kernel function as the front end traces it: its ``range`` loops are symbolic
        (``language.kernel_range``; docs/nki-0.1-rules.md section 9)."""
        fn = self.__dict__.get("_traced")
        if fn is None or fn[0] is not self.func:
            fn = (self.func, _symbolic.traced_function(self.func, kernel_range))
            self.__dict__["_traced"] = fn
        return fn[1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            # a jitted helper called inside a kernel runs inline; a mode='trace' helper is traced like
            # the kernel function (nki-samples rmsnorm_quant NKI-917 note), a plain one unrolls its range
            return (self.traced() if self.mode == "trace" else self.func)(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    def _inner(self):
        func, _ = _kernel_ast._unwrap(self.func)
        return func

    def begin_run(self, ctx: RunContext) -> None:
        func = self._inner()
        code = getattr(func, "__code__", None)
        ctx.scopes = _scopes.SourceRules(code, getattr(func, "__globals__", None), _KERNEL_CALLS)
        if not self.skip_middle_end:
            # iteration races (E029); ordered iterations under skip_middle_end_transformations
            n = 1
            for g in self.grid:
                n *= g
            ctx.races = _RaceLog(n > 1, ctx.options.strict, ctx.warned)

    def mutable_params(self) -> frozenset:
        # ERR err_cannot_update_immutable_parameter (SDK 2.26 nki.errors.rst): a parameter annotated
        # nt.mutable_tensor may be written
        func = self._inner()
        try:
            params = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):
            return frozenset()
        out = set()
        for p in params:
            ann = p.annotation
            name = getattr(ann, "name", None) if isinstance(ann, Annotation) else (ann if isinstance(ann, str) else "")
            if name and "mutable_tensor" in name:
                out.add(p.name)
        return frozenset(out)

    def check_outputs(self, ctx: RunContext, result: Any, params: dict) -> None:
        func = self._inner()
        code = getattr(func, "__code__", None)
        if code is None:
            return
        returned = {id(t.alloc) for t in _tensors(result)}
        for name in sorted(self.mutable_params()):
            t = params.get(name)
            if isinstance(t, Tensor) and t.alloc.written and id(t.alloc) not in returned:
                # ERR err_mutable_parameter_not_returned (SDK 2.26 nki.errors.rst)
                site = _ReturnSite(func).get() or (code.co_filename, _scopes.kernel_def_line(code))
                raise SimValueError(
                    "E016",
                    "return",
                    name,
                    f"Mutable kernel parameter `{name}` is written but not returned by the `return` "
                    "statement (ERR err_mutable_parameter_not_returned)",
                    f"Return it with the outputs: return ..., {name}",
                    where=site,
                )
        if self.writes_back() or not (result is None or (isinstance(result, (tuple, list)) and not result)):
            return
        # ERR err_tensor_output_not_written_to (SDK 2.26 nki.errors.rst): at least one output
        raise SimValueError(
            "E016",
            "kernel",
            None,
            f"kernel `{code.co_name}` has no output: it returns nothing (ERR err_tensor_output_not_written_to)",
            "Create the output with nl.ndarray(..., buffer=nl.shared_hbm), write it and return it",
            where=(code.co_filename, _scopes.kernel_def_line(code)),
        )


def _tensors(x):
    if isinstance(x, Tensor):
        yield x
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _tensors(v)


def jit(func: Callable | None = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``@nki.jit`` / ``@nki.jit(mode=...)``: every mode is accepted; all simulate here."""
    if func is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(func, _CoreKernel):
        return func
    return Kernel(func, mode=mode, **kwargs)


def trace(func: Callable | None = None, **kwargs: Any) -> Any:
    return jit(func, mode="trace", **kwargs)


def _as_kernel(kernel) -> _CoreKernel:
    if isinstance(kernel, _CoreKernel):
        return kernel
    if callable(kernel):
        return Kernel(kernel)
    raise TypeError(
        f"simulate_kernel: expected an NKI kernel (a function or @nki.jit object), got {type(kernel).__name__}"
    )


def trace_kernel(kernel: Callable, *args: Any, options: SimOptions | None = None, **kwargs: Any) -> tuple[Any, Any]:
    """Run ``kernel`` in the interpreter; return ``(outputs, trace)``.

    A coded error's traceback is trimmed to the user's frames, so it ends at the kernel line
    (``NKI_SIM_FULL_TRACEBACK=1`` keeps the interpreter's frames)."""
    return _trace_kernel(_as_kernel(kernel), *args, options=options, **kwargs)


def simulate_kernel(kernel: Callable, *args: Any, options: SimOptions | None = None, **kwargs: Any) -> Any:
    """``nki.simulate_kernel(kernel, *args, **kwargs)``: run on NumPy, return NumPy outputs."""
    return _trace_kernel(_as_kernel(kernel), *args, options=options, **kwargs)[0]


# Handlers for the device-only APIs, keyed by api name ("nki.benchmark", ...).  Empty by default,
# so those APIs raise E099 (no device here).  `nki-kernels run --estimate-benchmark` installs
# handlers from nki_kernels.estimate_benchmark (cost-model estimates, labelled as such).
device_handlers: dict = {}


class DeviceKernel(Kernel):
    """``nki.baremetal(k)`` / ``benchmark`` / ``profile``: needs hardware; simulate_kernel unwraps it.

    ``source`` is the object the API was given (a jitted kernel or a plain function, e.g. a
    harness wrapper that calls ``nki.simulate_kernel``); ``api_kwargs`` its keyword arguments
    (``warmup``, ``iters``, ``save_neff_name``, ...)."""

    def __init__(self, kernel: _CoreKernel, api: str, source: Any = None, api_kwargs: dict | None = None):
        super().__init__(kernel.func, kernel.mode, kernel.grid, kernel.skip_middle_end, **kernel.options)
        self.api = api
        self.source = kernel if source is None else source
        self.api_kwargs = dict(api_kwargs or {})
        self.benchmark_result = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            return self.func(*args, **kwargs)
        handler = device_handlers.get(self.api)
        if handler is not None:
            return handler(self, args, kwargs)
        raise needs_device(self.api)


# the __call__ code objects that run an @nki.jit kernel's function inline inside a run
_KERNEL_CALLS = frozenset({_CoreKernel.__call__.__code__, Kernel.__call__.__code__, DeviceKernel.__call__.__code__})


def _device_wrapper(api):
    def wrap(kernel=None, **kwargs):
        if kernel is None:
            return lambda k: wrap(k, **kwargs)
        return DeviceKernel(jit(kernel), api, source=kernel, api_kwargs=kwargs)

    wrap.__name__ = api.split(".")[-1]
    return wrap


baremetal = _device_wrapper("nki.baremetal")
benchmark = _device_wrapper("nki.benchmark")
profile = _device_wrapper("nki.profile")


def skip_middle_end_transformations(kernel: Callable) -> Kernel:
    """Compiler flag: affine_range behaves like sequential_range (so it is never shuffled)."""
    k = _copy.copy(jit(kernel))
    k.skip_middle_end = True
    return k
