"""Kernel entry points: ``nki.jit``, ``simulate_kernel``, SPMD grids, device-only stubs (spec §2)."""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from . import dtypes as dt
from .context import RunContext, activate, maybe_current
from .errors import SimRuntimeError, SimValueError, needs_device
from .options import SimOptions, default_options
from .tensor import HBM_KINDS, Tensor, hbm_input


class Kernel:
    """A jitted NKI kernel.  Calling it with NumPy arrays simulates it; inside another kernel
    it runs inline (helpers may take and return on-chip tiles)."""

    def __init__(self, func, mode="auto", grid=(), skip_middle_end=False, **options):
        self.func = func
        self.mode = mode
        self.grid = tuple(grid)
        self.skip_middle_end = skip_middle_end
        self.options = options
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)
        self.__doc__ = getattr(func, "__doc__", None)
        self.__module__ = getattr(func, "__module__", None)
        self.__wrapped__ = func

    def __getitem__(self, grid) -> "Kernel":
        if maybe_current() is not None:
            raise SimRuntimeError("E019", "kernel[grid]", None, "nested kernel with spmd grid is not supported",
                                  "Launch SPMD grids only from the host (simulate_kernel(kernel[g], ...))")
        grid = grid if isinstance(grid, tuple) else (grid,)
        g = tuple(int(x) for x in grid)
        if any(x < 1 for x in g):
            raise SimValueError("E011", "kernel[grid]", "grid", f"grid extents must be >= 1, got {g}")
        return Kernel(self.func, self.mode, g, self.skip_middle_end, **self.options)

    def __call__(self, *args, **kwargs):
        if maybe_current() is not None:
            return self.func(*args, **kwargs)
        return simulate_kernel(self, *args, **kwargs)

    def __repr__(self):
        return f"<nki kernel {self.__name__}{list(self.grid) if self.grid else ''}>"


def jit(func=None, mode="auto", **kwargs):
    """``@nki.jit`` / ``@nki.jit(mode=...)``: every mode is accepted; all simulate here."""
    if func is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(func, Kernel):
        return func
    return Kernel(func, mode=mode, **kwargs)


def trace(func=None, **kwargs):
    return jit(func, mode="trace", **kwargs)


# Handlers for the device-only APIs, keyed by api name ("nki.benchmark", ...).  Empty by default,
# so those APIs raise E099 (no device here).  `nki-kernels run --estimate-benchmark` installs
# handlers from nki_kernels.estimate_benchmark (cost-model estimates, labelled as such).
device_handlers: dict = {}


class DeviceKernel(Kernel):
    """``nki.baremetal(k)`` / ``benchmark`` / ``profile``: needs hardware; simulate_kernel unwraps it.

    ``source`` is the object the API was given (a jitted kernel or a plain function, e.g. a
    harness wrapper that calls ``nki.simulate_kernel``); ``api_kwargs`` its keyword arguments
    (``warmup``, ``iters``, ``save_neff_name``, ...)."""

    def __init__(self, kernel: Kernel, api: str, source=None, api_kwargs=None):
        super().__init__(kernel.func, kernel.mode, kernel.grid, kernel.skip_middle_end, **kernel.options)
        self.api = api
        self.source = kernel if source is None else source
        self.api_kwargs = dict(api_kwargs or {})
        self.benchmark_result = None

    def __getitem__(self, grid):
        return DeviceKernel(Kernel.__getitem__(self, grid), self.api, self.source, self.api_kwargs)

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
    k = jit(kernel)
    cls = type(k)
    out = cls.__new__(cls)
    out.__dict__.update(k.__dict__)
    out.skip_middle_end = True
    return out


def _convert_arg(ctx, a, name):
    if isinstance(a, np.ndarray):
        return hbm_input(ctx, a, name)
    if isinstance(a, np.generic):
        return a.item()
    if hasattr(a, "__array__") and hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, Tensor):
        return hbm_input(ctx, np.asarray(a), name)  # e.g. CPU torch tensors
    return a


def _to_numpy(x, ctx):
    if isinstance(x, Tensor):
        if x.buffer not in HBM_KINDS:
            raise SimValueError("E007", "return", x.name, f"kernel outputs must be HBM tensors, got {x.buffer}",
                                "Store results into an nl.ndarray(..., buffer=nl.shared_hbm) and return that")
        if not x.alloc.written:
            raise SimValueError("E016", "return", x.name,
                                f"output tensor `{x.name}` is returned but never written (garbage on hardware)",
                                "Write it with nl.store / nisa.dma_copy before returning", where=x.alloc.origin)
        a = x.read()
        out = np.empty(a.shape, dtype=dt.storage_dtype(x.dtype, "hw"))
        dt.cast_into(out, a, x.dtype)
        return out
    if isinstance(x, tuple):
        return tuple(_to_numpy(v, ctx) for v in x)
    if isinstance(x, list):
        return [_to_numpy(v, ctx) for v in x]
    return x


def _unwrap(kernel):
    if isinstance(kernel, Kernel):
        return kernel
    if callable(kernel):
        return Kernel(kernel)
    raise TypeError(f"simulate_kernel: expected an NKI kernel (a function or @nki.jit object), "
                    f"got {type(kernel).__name__}")


def trace_kernel(kernel, *args, options: SimOptions | None = None, **kwargs):
    """Run ``kernel`` in the interpreter; return ``(outputs, trace)``."""
    k = _unwrap(kernel)
    opts = options if options is not None else default_options()
    grid = k.grid
    ctx = RunContext(opts, kernel_name=k.__name__, grid=grid)
    ctx.skip_middle_end = k.skip_middle_end
    with activate(ctx), np.errstate(all="ignore"):   # NKI has no fp exceptions: inf/nan propagate
        names = _arg_names(k.func, len(args))
        conv = [_convert_arg(ctx, a, n) for a, n in zip(args, names)]
        kw = {n: _convert_arg(ctx, v, n) for n, v in kwargs.items()}
        result = None
        points = list(itertools.product(*[range(g) for g in grid])) if grid else [()]
        for pid in points:
            ctx.program_id = pid
            ctx.hbm_cursor = 0
            r = k.func(*conv, **kw)
            if result is None:
                result = r
        outputs = _to_numpy(result, ctx)
        trace = ctx.finish()
    return outputs, trace


def simulate_kernel(kernel, *args, options: SimOptions | None = None, **kwargs) -> Any:
    """``nki.simulate_kernel(kernel, *args, **kwargs)``: run on NumPy, return NumPy outputs."""
    return trace_kernel(kernel, *args, options=options, **kwargs)[0]


def _arg_names(func, n):
    import inspect
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]
