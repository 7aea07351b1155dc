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

import importlib
import os
from dataclasses import dataclass

from . import shapes

KERNEL_TARGETS = {
    "conv2d": "nki_kernels.kernels.conv2d:fused_conv2d_maxpool",
    "matmul": "nki_kernels.kernels.matmul:matmul",
    "attention": "nki_kernels.kernels.attention:flash_attention",
}
ORACLE_TARGETS = {
    "conv2d": "nki_kernels.oracles:conv2d_maxpool_ref",
    "matmul": "nki_kernels.oracles:matmul_ref",
    "attention": "nki_kernels.oracles:attention_ref",
}
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)

# dtype -> (rtol, atol as a fraction of max |reference|): the project's one table
from nki_kernels.tolerances import TOLERANCE as TOLERANCES  # noqa: E402


def _resolve(target: str):
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"bad target {target!r}: use module:function")
    return getattr(importlib.import_module(module), attr)


def kernel_target(name: str) -> str:
    """``module:function`` of a kernel, honouring ``NKI_HW_KERNEL_<NAME>``."""
    if name not in KERNEL_TARGETS:
        raise KeyError(f"unknown kernel {name!r}; allowed: {', '.join(KERNEL_TARGETS)}")
    return os.environ.get(f"NKI_HW_KERNEL_{name.upper()}", KERNEL_TARGETS[name])


def load_kernel(name: str):
    """The ``@nki.jit`` kernel function registered under ``name``."""
    return _resolve(kernel_target(name))


def oracle(name: str):
    """The float64 NumPy reference with the kernel's signature."""
    return _resolve(ORACLE_TARGETS[name])


def np_dtype(dtype: str):
    import numpy as np  # noqa: PLC0415
    if dtype == "bfloat16":
        import ml_dtypes  # noqa: PLC0415
        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def make_inputs(case: shapes.Case, seed: int = 0):
    """Seeded inputs ``(args, kwargs)`` for a case, in the case's dtype.

    conv2d follows the CS149 harness (uniform [0, 1) images and weights, zero bias when
    the case has none); matmul and attention use standard normals.
    """
    import numpy as np  # noqa: PLC0415
    rng = np.random.default_rng(seed)
    p, dt = case.p, np_dtype(case.dtype)
    if case.kernel == "conv2d":
        x = rng.random((p["B"], p["C_in"], p["H"], p["W"]), dtype=np.float32)
        w = rng.random((p["C_out"], p["C_in"], p["K"], p["K"]), dtype=np.float32)
        b = rng.random(p["C_out"], dtype=np.float32) if p["bias"] else np.zeros(p["C_out"], np.float32)
        return (x.astype(dt), w.astype(dt), b.astype(dt)), {"pool_size": p["pool_size"]}
    if case.kernel == "matmul":
        lhs_t = rng.standard_normal((p["K"], p["M"]), dtype=np.float32)
        rhs = rng.standard_normal((p["K"], p["N"]), dtype=np.float32)
        return (lhs_t.astype(dt), rhs.astype(dt)), {}
    if case.kernel == "attention":
        q = rng.standard_normal((p["B"], p["H"], p["Sq"], p["D"]), dtype=np.float32)
        k = rng.standard_normal((p["B"], p["H"], p["Sk"], p["D"]), dtype=np.float32)
        v = rng.standard_normal((p["B"], p["H"], p["Sk"], p["D"]), dtype=np.float32)
        return (q.astype(dt), k.astype(dt), v.astype(dt)), {"causal": p["causal"]}
    raise KeyError(f"unknown kernel {case.kernel!r}")


def reference(case: shapes.Case, args, kwargs):
    """Oracle output in float64 for the given inputs."""
    import numpy as np  # noqa: PLC0415
    return np.asarray(oracle(case.kernel)(*[np.asarray(a, dtype=np.float64) for a in args], **kwargs))


def assert_close(out, ref, dtype: str, what: str = "output") -> float:
    """Check a kernel output against a reference; return the max abs error.

    The project's one comparison (:func:`nki_kernels.tolerances.assert_close`): raises
    AssertionError naming the problem: wrong shape, NaN/inf (poison leak), all zeros (a
    kernel that silently did nothing), or error beyond the dtype's tolerance.
    """
    from nki_kernels.tolerances import assert_close as _assert_close  # noqa: PLC0415
    return _assert_close(out, ref, dtype, what)


def _nki():
    """The real ``neuronxcc.nki`` module; ImportError with the fix when absent."""
    try:
        from neuronxcc import nki  # noqa: PLC0415
    except ImportError as e:
        raise ImportError("neuronxcc.nki is not importable: run on a trn2 instance in a Neuron "
                          "SDK 2.26/2.27 venv (e.g. /opt/aws_neuronx_venv_pytorch_2_8)") from e
    return nki


def run_baremetal(kernel, *args, **kwargs):
    """Compile and run ``kernel`` once on the NeuronCore(s) in ``NEURON_RT_VISIBLE_CORES``."""
    return _nki().baremetal(kernel)(*args, **kwargs)


def run_simulator(kernel, *args, **kwargs):
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


def run_benchmark(kernel, args, kwargs, *, warmup: int, iters: int,
                  save_neff_name: str | None = None, additional_compile_opt: str | None = None) -> Latency:
    """``nki.benchmark(warmup=, iters=)`` then read the p0..p100 latency percentiles.

    ``save_neff_name`` keeps the compiled NEFF (a file name, written in the current
    directory) for a later ``neuron-profile capture``.  Benchmark outputs are undefined
    and are not returned.
    """
    if warmup < 0 or iters < 1:
        raise ValueError(f"warmup must be >= 0 and iters >= 1, got warmup={warmup}, iters={iters}")
    opts = {"warmup": warmup, "iters": iters}
    if save_neff_name:
        opts["save_neff_name"] = save_neff_name
    if additional_compile_opt:
        opts["additional_compile_opt"] = additional_compile_opt
    bench = _nki().benchmark(**opts)(kernel)
    bench(*args, **kwargs)
    lat = bench.benchmark_result.nc_latency
    pct = {f"p{p}": float(lat.get_latency_percentile(p)) for p in PERCENTILES}
    return Latency(pct, warmup, iters)
