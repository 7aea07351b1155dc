"""Fake ``neuronxcc.nki`` for tests: no device, made-up latencies (never real numbers).

``benchmark(warmup=, iters=, save_neff_name=)`` returns a wrapper that, when called,
sleeps ``$FAKE_NKI_BENCH_SECONDS`` (default 0; with ``FAKE_NKI_BENCH_IGNORE_TERM=1`` it
ignores SIGTERM meanwhile, with ``FAKE_NKI_BENCH_CHILD=1`` it starts a ``sleep`` child
process first, like a runtime helper), writes a fake NEFF and exposes
``benchmark_result.nc_latency.get_latency_percentile(p)`` = base * (1 + p / 100) with
base ``$FAKE_NKI_LATENCY_US`` (default 100).  ``baremetal(kernel)`` calls the kernel
directly (only NumPy stand-ins work).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from types import SimpleNamespace
from typing import Any


def jit(func: Any = None, **_kwargs: Any) -> Any:
    return func if func is not None else (lambda f: f)


class _Latency:
    def __init__(self, base):
        self.base = base

    def get_latency_percentile(self, p):
        return self.base * (1.0 + p / 100.0)


class _Benchmarked:
    def __init__(self, kernel, warmup, iters, save_neff_name, additional_compile_opt):
        self.kernel, self.warmup, self.iters = kernel, warmup, iters
        self.save_neff_name, self.additional_compile_opt = save_neff_name, additional_compile_opt
        self.benchmark_result = None

    def __call__(self, *args, **kwargs):
        seconds = float(os.environ.get("FAKE_NKI_BENCH_SECONDS", "0"))
        if os.environ.get("FAKE_NKI_BENCH_IGNORE_TERM") == "1":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = ""
        if os.environ.get("FAKE_NKI_BENCH_CHILD") == "1":
            child = f" child={subprocess.Popen(['sleep', str(max(seconds, 1) + 30)]).pid}"
        log = os.environ.get("FAKE_LOG")
        if log:
            with open(log, "a") as f:
                f.write(
                    f"nki.benchmark warmup={self.warmup} iters={self.iters} "
                    f"neff={self.save_neff_name}{child} pid={os.getpid()}\n"
                )
        time.sleep(seconds)
        if self.save_neff_name:
            with open(self.save_neff_name, "w") as f:
                f.write("fake NEFF\n")
        base = float(os.environ.get("FAKE_NKI_LATENCY_US", "100"))
        self.benchmark_result = SimpleNamespace(nc_latency=_Latency(base))


def benchmark(
    kernel: Any = None,
    *,
    warmup: int = 10,
    iters: int = 100,
    save_neff_name: str | None = None,
    save_trace_name: str | None = None,
    additional_compile_opt: str | None = None,
) -> Any:
    def wrap(k):
        return _Benchmarked(k, warmup, iters, save_neff_name, additional_compile_opt)

    return wrap(kernel) if kernel is not None else wrap


def baremetal(kernel: Any = None, **_kwargs: Any) -> Any:
    def wrap(k):
        return lambda *a, **kw: k(*a, **kw)

    return wrap(kernel) if kernel is not None else wrap


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    return kernel(*args, **kwargs)
