"""Running a kernel: the run context, argument conversion, the SPMD / LNC instances, outputs.

``trace_kernel(kernel, *args)`` / ``simulate_kernel`` run any :class:`Kernel` (the front ends
subclass it: NKI 0.1 ``nki.jit`` kernels, NKI 0.7 ``nki.jit`` kernels) or plain function.  A kernel
class declares the run's policies: the class of its tensors, the capacity policy, whether array
arguments are written back into the caller's arrays, and how the instances of a grid run (one
after the other, or in lockstep through ``RunContext.call_hook``).
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dtypes as dt
from .context import RunContext, activate, lenient, maybe_current
from .errors import SimError, SimRuntimeError, SimValueError, trim_traceback
from .options import SimOptions, default_options
from .tensor import HBM_KINDS, Tensor, hbm_input

if TYPE_CHECKING:
    from .trace import Trace


class Kernel:
    """A jitted kernel.  Calling it with NumPy arrays simulates it; inside another kernel it runs
    inline (helpers may take and return on-chip tiles).  Policies of a run (class attributes):

    ``tensor_cls``      the class of the run's new tensors
    """

    tensor_cls: type[Tensor] = Tensor

    def __init__(
        self,
        func: Callable[..., Any],
        mode: str = "auto",
        grid: Sequence[int] = (),
        skip_middle_end: bool = False,
        **options: Any,
    ):
        self.func = func
        self.mode = mode
        self.grid = tuple(grid)
        self.skip_middle_end = skip_middle_end
        self.options = options
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)
        self.__doc__ = getattr(func, "__doc__", None)
        self.__module__ = getattr(func, "__module__", None)  # type: ignore[assignment]  # None as update_wrapper
        self.__wrapped__ = func

    def __getitem__(self, grid: int | tuple[int, ...]) -> Kernel:
        if maybe_current() is not None:
            raise SimRuntimeError(
                "E019",
                "kernel[grid]",
                None,
                "nested kernel with spmd grid is not supported",
                "Launch SPMD grids only from the host (simulate_kernel(kernel[g], ...))",
            )
        grid = grid if isinstance(grid, tuple) else (grid,)
        g = tuple(int(x) for x in grid)
        if any(x < 1 for x in g):
            raise SimValueError("E011", "kernel[grid]", "grid", f"grid extents must be >= 1, got {g}")
        return self.with_grid(g)

    def with_grid(self, grid: tuple) -> Kernel:
        """This kernel launched on ``grid``."""
        k = copy.copy(self)
        k.grid = grid
        return k

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            return self.func(*args, **kwargs)
        return simulate_kernel(self, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<nki kernel {self.__name__}{list(self.grid) if self.grid else ''}>"

    # -- the run's policies (front ends override) ------------------------------------------------
    def writes_back(self) -> bool:
        """Are array arguments writable, their written values copied back into the caller's arrays?
        (NKI 0.1: ``nki.trace`` kernels, SDK nki/test test_psum_modulo_alloc & co.)"""
        return self.mode == "trace"

    def begin_run(self, ctx: RunContext) -> None:
        """Install the front end's per-run checkers on ``ctx`` (source rules, iteration races)."""

    def mutable_params(self) -> frozenset:
        """Names of the parameters the kernel may write (NKI 0.1: annotated ``nt.mutable_tensor``)."""
        return frozenset()

    def check_outputs(self, ctx: RunContext, result: Any, params: dict) -> None:
        """Kernel-level output rules once the instances ran (``params``: name -> converted argument)."""

    def run_instances(self, ctx: RunContext, points: list, args: list, kwargs: dict) -> Any:
        """Run the instances of the launch grid; the first instance's return value is the kernel's."""
        result = None
        for pid in points:
            ctx.program_id = pid
            ctx.hbm_cursor = 0
            r = self.func(*args, **kwargs)
            if result is None:
                result = r
        return result


def _convert_arg(ctx, a, name, mutable=False):
    if isinstance(a, np.ndarray):
        return hbm_input(ctx, a, name, mutable=mutable)
    if isinstance(a, np.generic):
        return a.item()
    if isinstance(a, type):
        return a  # np.float32 / np.float16 type objects are dtypes, not arrays
    if hasattr(a, "__array__") and hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, Tensor):
        return hbm_input(ctx, np.asarray(a), name, mutable=mutable)  # e.g. CPU torch tensors
    return a


def _return_line(func) -> int | None:
    """The line of the kernel's ``return`` statement when it has exactly one (error locations)."""
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    try:
        src, first = inspect.getsourcelines(func)
        tree = ast.parse(textwrap.dedent("".join(src)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0] if tree.body else None
    rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None] if fn else []
    return first + rets[0].lineno - 1 if len(rets) == 1 else None


class _ReturnSite:
    """(file, line) of the kernel's `return`, looked up only when an error needs it."""

    def __init__(self, func):
        self.func = func

    def get(self):
        code = getattr(self.func, "__code__", None)
        if code is None:
            return None
        return (code.co_filename, _return_line(self.func) or code.co_firstlineno)


def _to_numpy(x, ctx, where=None):
    if isinstance(x, Tensor):
        if x.buffer not in HBM_KINDS:
            where = where.get() if where is not None else None
            # Decision (README divergences): real NKI 0.1's simulate_kernel returns an on-chip tile's
            # values (the SDK simulator's behaviour), while on hardware top-level outputs
            # must be in HBM (nki_known_issues.rst "Top-level tensors must be on HBM").  So: the
            # values, with a SimWarning at the user's `return` line; an E007 error under strict.
            what = (
                f"top-level kernel outputs must be in HBM on hardware, `{x.name}` is in {x.buffer.upper()} "
                "(nki_known_issues.rst); store it into an nl.ndarray(..., buffer=nl.shared_hbm) and return that"
            )
            lenient("ki.top_level_hbm", what, op="return", arg=x.name, where=where)
        if not x.alloc.written and not x.alloc.argument:
            raise SimValueError(
                "E016",
                "return",
                x.name,
                f"output tensor `{x.name}` is returned but never written (garbage on hardware)",
                "Write it with nl.store / nisa.dma_copy before returning",
                where=x.alloc.origin,
            )
        a = x.read()
        out = np.empty(a.shape, dtype=dt.storage_dtype(x.dtype, "hw"))
        dt.cast_into(out, a, x.dtype)
        return out
    if isinstance(x, tuple):
        return tuple(_to_numpy(v, ctx, where) for v in x)
    if isinstance(x, list):
        return [_to_numpy(v, ctx, where) for v in x]
    return x


def _unwrap(kernel):
    if isinstance(kernel, Kernel):
        return kernel
    raise TypeError(
        f"simulate_kernel: expected an NKI kernel (a function or @nki.jit object), got {type(kernel).__name__}"
    )


def trace_kernel(kernel: Kernel, *args: Any, options: SimOptions | None = None, **kwargs: Any) -> tuple[Any, Trace]:
    """Run ``kernel`` in the interpreter; return ``(outputs, trace)``.

    A coded error's traceback is trimmed to the user's frames, so it ends at the kernel line
    (``NKI_SIM_FULL_TRACEBACK=1`` keeps the interpreter's frames)."""
    try:
        return _trace_kernel(kernel, *args, options=options, **kwargs)
    except SimError as e:
        raise e.with_traceback(trim_traceback(e.__traceback__)) from e.__cause__


def _trace_kernel(kernel, *args, options: SimOptions | None = None, **kwargs):
    k = _unwrap(kernel)
    opts = options if options is not None else default_options()
    grid = k.grid
    ctx = RunContext(opts, kernel_name=k.__name__, grid=grid, tensor_cls=k.tensor_cls)
    ctx.skip_middle_end = k.skip_middle_end
    with activate(ctx), np.errstate(all="ignore"):  # NKI has no fp exceptions: inf/nan propagate
        k.begin_run(ctx)
        names = _arg_names(k.func, len(args))
        mutable = k.writes_back()
        declared = k.mutable_params()
        conv = [_convert_arg(ctx, a, n, mutable or n in declared) for a, n in zip(args, names, strict=False)]
        kw = {n: _convert_arg(ctx, v, n, mutable or n in declared) for n, v in kwargs.items()}
        points = list(itertools.product(*[range(g) for g in grid])) if grid else [()]
        result = k.run_instances(ctx, points, conv, kw)
        if ctx.pending:
            ctx.commit_pending()
        if ctx.races is not None:
            ctx.races.finish()
        k.check_outputs(ctx, result, {**dict(zip(names, conv, strict=False)), **kw})
        where = _ReturnSite(k.func)
        outputs = _to_numpy(result, ctx, where)
        if mutable:
            for a, t in list(zip(args, conv, strict=False)) + [(kwargs[n], kw[n]) for n in kwargs]:
                # "Input arrays are updated in-place if the kernel modified the corresponding HBM
                # tensors" (aws-neuron-sdk 81ce03ae nki/guides/nki_simulator.rst, "Execution")
                if isinstance(a, np.ndarray) and isinstance(t, Tensor) and t.alloc.written:
                    v = _to_numpy(t, ctx, where)
                    a[...] = v.astype(a.dtype, copy=False)
        trace = ctx.finish()
    return outputs, trace


def simulate_kernel(kernel: Kernel, *args: Any, options: SimOptions | None = None, **kwargs: Any) -> Any:
    """``nki.simulate_kernel(kernel, *args, **kwargs)``: run on NumPy, return NumPy outputs."""
    return trace_kernel(kernel, *args, options=options, **kwargs)[0]


def _arg_names(func, n):
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]
