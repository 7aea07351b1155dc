"""NKI 0.1 kernels: ``nki.jit`` (:class:`Kernel`), ``simulate_kernel`` / ``trace_kernel``, SPMD grids,
the device-only stubs ``baremetal`` / ``benchmark`` / ``profile`` (spec §2)."""
from __future__ import annotations

import copy as _copy
import inspect
from typing import Any

from ..core.context import maybe_current
from ..core.errors import NKISyntaxError, needs_device
from ..core.options import SimOptions
from ..core.runner import Kernel as _CoreKernel
from ..core.runner import trace_kernel as _trace_kernel
from . import symbolic as _symbolic
from .allocation import DirectAllocation
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
    arguments are immutable inputs (``nki.trace`` kernels write theirs, copied back); the instances of
    an SPMD grid run one after the other."""

    tensor_cls = Tile
    capacity_policy = "spill"    # live SBUF over capacity: a warning (the compiler spills), E006 under strict
    stack_allocator = False      # @ncc.enable_stack_allocator
    force_auto_alloc = False     # @ncc.force_auto_alloc

    def run_instances(self, ctx, points, args, kwargs):
        """Run the grid, the kernel function traced (:meth:`traced`), with the direct-allocation rules
        (nki01/allocation.py) watching the run."""
        if self.stack_allocator and not self.skip_middle_end:
            # CMP enable_stack_allocator (SDK 2.26 nki/compiler/__init__.py): "Must use together with
            # skip_middle_end_transformations"
            raise NKISyntaxError("E030", "nki.compiler.enable_stack_allocator", None,
                                 "enable_stack_allocator must be used together with skip_middle_end_transformations",
                                 "Add @nki.compiler.skip_middle_end_transformations below it",
                                 where=_def_line(self.func))
        ctx.direct = direct = DirectAllocation(forced_auto=self.force_auto_alloc)
        k = _copy.copy(self)
        k.func = self.traced()       # its `range` loops are symbolic (docs/nki-0.1-rules.md section 9)
        result = _CoreKernel.run_instances(k, ctx, points, args, kwargs)
        direct.finish(result)
        return result

    def traced(self):
        """The kernel function as the front end traces it: its ``range`` loops are symbolic
        (``language.kernel_range``; docs/nki-0.1-rules.md section 9)."""
        fn = self.__dict__.get("_traced")
        if fn is None or fn[0] is not self.func:
            from .language import kernel_range
            fn = (self.func, _symbolic.traced_function(self.func, kernel_range))
            self.__dict__["_traced"] = fn
        return fn[1]

    def __call__(self, *args, **kwargs):
        if maybe_current() is not None:
            # a jitted helper called inside a kernel runs inline; a mode='trace' helper is traced like
            # the kernel function (nki-samples rmsnorm_quant NKI-917 note), a plain one unrolls its range
            return (self.traced() if self.mode == "trace" else self.func)(*args, **kwargs)
        return super().__call__(*args, **kwargs)


def jit(func=None, mode="auto", **kwargs):
    """``@nki.jit`` / ``@nki.jit(mode=...)``: every mode is accepted; all simulate here."""
    if func is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(func, _CoreKernel):
        return func
    return Kernel(func, mode=mode, **kwargs)


def trace(func=None, **kwargs):
    return jit(func, mode="trace", **kwargs)


def _as_kernel(kernel) -> _CoreKernel:
    if isinstance(kernel, _CoreKernel):
        return kernel
    if callable(kernel):
        return Kernel(kernel)
    raise TypeError(f"simulate_kernel: expected an NKI kernel (a function or @nki.jit object), "
                    f"got {type(kernel).__name__}")


def trace_kernel(kernel, *args, options: SimOptions | None = None, **kwargs):
    """Run ``kernel`` in the interpreter; return ``(outputs, trace)``.

    A coded error's traceback is trimmed to the user's frames, so it ends at the kernel line
    (``NKI_SIM_FULL_TRACEBACK=1`` keeps the interpreter's frames)."""
    return _trace_kernel(_as_kernel(kernel), *args, options=options, **kwargs)


def simulate_kernel(kernel, *args, options: SimOptions | None = None, **kwargs) -> Any:
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

    def __init__(self, kernel: _CoreKernel, api: str, source=None, api_kwargs=None):
        super().__init__(kernel.func, kernel.mode, kernel.grid, kernel.skip_middle_end, **kernel.options)
        self.api = api
        self.source = kernel if source is None else source
        self.api_kwargs = dict(api_kwargs or {})
        self.benchmark_result = None

    def __call__(self, *args, **kwargs):
        if maybe_current() is not None:
            return self.func(*args, **kwargs)
        handler = device_handlers.get(self.api)
        if handler is not None:
            return handler(self, args, kwargs)
        raise needs_device(self.api)


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


def skip_middle_end_transformations(kernel):
    """Compiler flag: affine_range behaves like sequential_range (so it is never shuffled)."""
    k = _copy.copy(jit(kernel))
    k.skip_middle_end = True
    return k


