"""Run the project's kernels through the real Neuron SDK (NumPy in, NumPy out).

Nothing here imports ``neuronxcc`` or the kernels at module import time; each function
imports what it needs.  On a trn2 instance with Neuron SDK 2.26/2.27:

- ``run_baremetal(kernel, *args, **kwargs)``: ``nki.baremetal`` (compile, run once).
- ``run_benchmark(kernel, args, kwargs, warmup, iters, save_neff_name=...)``:
  ``nki.benchmark`` and the latency percentiles of
  ``benchmark_result.nc_latency.get_latency_percentile(p)`` (microseconds).
- ``make_inputs(case, seed)``, ``oracle(case)``, ``assert_close(...)``: seeded inputs,
  float64 NumPy references and the per-dtype tolerance used by every hardware check.

Kernels are looked up by name (``conv2d``, ``matmul``, ``attention``).  To run your own
implementation through the same harness, set ``NKI_HW_KERNEL_<NAME>=module:function``
(for example ``NKI_HW_KERNEL_CONV2D=conv2d:fused_conv2d_maxpool`` for a CS149 solution).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from nki_kernels.kernels import registry
from nki_kernels.kernels.registry import Case

PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def kernel_target(name: str, api: str = "0.1") -> str:
    """``module:function`` of a kernel of NKI generation ``api``, honouring ``NKI_HW_KERNEL_<NAME>``."""
    spec = registry.get(name)
    return os.environ.get(f"NKI_HW_KERNEL_{spec.name.upper()}", spec.entry(api))


def load_kernel(name: str, api: str = "0.1") -> Any:
    """The ``@nki.jit`` kernel function registered under ``name``."""
    return registry.resolve_target(kernel_target(name, api))


def oracle(name: str) -> Any:
    """The float64 NumPy reference with the kernel's signature."""
    return registry.get(name).load_oracle()


def make_inputs(case: Case, seed: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Seeded inputs ``(args, kwargs)`` for a case, in the case's dtype (the registry's builder:
    conv2d as the CS149 harness draws them, matmul and attention standard normals)."""
    return registry.get(case.kernel).make_inputs(case, seed)


def reference(case: Case, args: Any, kwargs: dict[str, Any]) -> Any:
    """Oracle output in float64 for the given inputs."""
    return registry.get(case.kernel).reference(args, kwargs)


def assert_close(out: Any, ref: Any, dtype: str, what: str = "output") -> float:
    """Check a kernel output against a reference; return the max abs error.

    The project's one comparison (:func:`nki_kernels.tolerances.assert_close`): raises
    AssertionError naming the problem: wrong shape, NaN/inf (poison leak), all zeros (a
    kernel that silently did nothing), or error beyond the dtype's tolerance.
    """
    from nki_kernels.tolerances import (
        assert_close as _assert_close,  # here: the job's own process has the standard library only
    )

    return _assert_close(out, ref, dtype, what)


def _nki() -> Any:
    """The real ``neuronxcc.nki`` module; ImportError with the fix when absent."""
    try:
        from neuronxcc import nki  # noqa: PLC0415 - the Neuron SDK 2.26/2.27: only in its venv on a trn2
    except ImportError as e:
        raise ImportError(
            "neuronxcc.nki is not importable: run on a trn2 instance in a Neuron "
            "SDK 2.26/2.27 venv (e.g. /opt/aws_neuronx_venv_pytorch_2_8)"
        ) from e
    return nki


def run_baremetal(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Compile and run ``kernel`` once on the NeuronCore(s) in ``NEURON_RT_VISIBLE_CORES``."""
    return _nki().baremetal(kernel)(*args, **kwargs)


def run_simulator(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """The SDK's own ``nki.simulate_kernel`` (CPU), for simulator-vs-device diffs."""
    return _nki().simulate_kernel(kernel, *args, **kwargs)


@dataclass
class Latency:
    """Latency percentiles in microseconds from one ``nki.benchmark`` run."""

    percentiles_us: dict
    warmup: int
    iters: int

    @property
    def p50(self) -> float:
        return self.percentiles_us["p50"]

    @property
    def p99(self) -> float:
        return self.percentiles_us["p99"]


def run_benchmark(
    kernel: Any,
    args: Any,
    kwargs: Any,
    *,
    warmup: int,
    iters: int,
    save_neff_name: str | None = None,
    additional_compile_opt: str | None = None,
) -> Latency:
    """``nki.benchmark(warmup=, iters=)`` then read the p0..p100 latency percentiles.

    ``save_neff_name`` keeps the compiled NEFF (a file name, written in the current
    directory) for a later ``neuron-profile capture``.  Benchmark outputs are undefined
    and are not returned.
    """
    if warmup < 0 or iters < 1:
        raise ValueError(f"warmup must be >= 0 and iters >= 1, got warmup={warmup}, iters={iters}")
    opts: dict[str, Any] = {"warmup": warmup, "iters": iters}
    if save_neff_name:
        opts["save_neff_name"] = save_neff_name
    if additional_compile_opt:
        opts["additional_compile_opt"] = additional_compile_opt
    bench = _nki().benchmark(**opts)(kernel)
    bench(*args, **kwargs)
    lat = bench.benchmark_result.nc_latency
    pct = {f"p{p}": float(lat.get_latency_percentile(p)) for p in PERCENTILES}
    return Latency(pct, warmup, iters)
