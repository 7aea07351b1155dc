"""The NKI 0.1 hardware path (Neuron SDK 2.26/2.27, ``neuronxcc.nki``): its implementation of the
hardware job's protocol (``nki_kernels.hw.protocol``), and its step commands::

    python -m nki_kernels.hw.job bench    --kernel conv2d --case NAME --out DIR [--warmup 10 --iters 100]
    python -m nki_kernels.hw.job estimate --kernel conv2d --case NAME --out DIR
    python -m nki_kernels.hw.job simulate --kernel conv2d --case NAME --out FILE.npy

``bench`` needs a NeuronCore (``NEURON_RT_VISIBLE_CORES`` picks it): it runs ``nki.benchmark``,
keeps the NEFF as ``DIR/<kernel>_<case>.neff`` and writes ``DIR/bench.json`` (p0..p100, warmup,
iters, SDK versions, core id, the CS149 thresholds and the ratio to the cost-model estimate when
``DIR/<kernel>_<case>.estimate.json`` exists).  ``estimate`` runs the cost model on the NumPy
interpreter (CPU only) and ``simulate`` saves the interpreter's output for the same seeded inputs
(simulator-vs-device diffs); both import the kernel -- yours too, via ``NKI_HW_KERNEL_<NAME>`` --
with ``neuronxcc.nki`` aliased to the interpreter, in a process of their own, so they work on a
laptop and never mix the real SDK's objects with the interpreter's.  Correctness and the construct
smoke test are pytest files (``hw_tests/``), run by the job as they are.  Hardware numbers are
reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from nki_kernels.kernels.registry import Case

from . import device, env
from .protocol import DEFAULT_SEED, ROOT, HwPath, Step, StepContext, cs149_verdict, env_argv, estimate_ratio, stem
from .protocol import utc as _utc
from .protocol import write_json as _write_json


class Nki01Path(HwPath):
    """SDK 2.26/2.27: ``nki.benchmark`` latency, pytest ``hw_tests`` (``nki.baremetal``, torch-neuronx,
    ``nki.simulate_kernel``), ``neuron-profile`` captures."""

    name, api, label, module = "nki01", "0.1", "nki-0.1", "nki_kernels.hw.job"
    profiler = "neuron-profile"
    device_env = {"NKI_BACKEND": "neuron"}
    executed_by = "nki_kernels.sim (interpreter, neuronxcc alias)"

    # -- commands
    def has_smoke_test(self, ctx: StepContext) -> bool:
        return os.path.isfile(ctx.constructs_test)

    def smoke_step(self, ctx: StepContext, core: str) -> Step:
        """``hw_tests/test_constructs.py`` (or ``NKI_HW_CONSTRUCTS_TEST``) under pytest, device required."""
        junit = os.path.join(ctx.run, "hw_tests", "constructs.junit.xml")
        argv = env_argv(
            {"NEURON_RT_VISIBLE_CORES": core, **self.device_env, "NKI_HW_REQUIRE": "1", "PYTHONPATH": ctx.pythonpath},
            ctx.python,
            "-m",
            "pytest",
            ctx.constructs_test,
            "-rs",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
        )
        return Step("constructs", "constructs", argv, ROOT, core=core)

    def check_step(self, ctx: StepContext, kernel: str, core: str) -> Step:
        """``hw_tests`` of one kernel (``nki.baremetal`` and torch-neuronx vs the oracles, simulators vs
        device); ``NKI_HW_REQUIRE=1``: a missing device or SDK fails the step instead of skipping."""
        tests = os.path.join(ROOT, "hw_tests")
        argv = env_argv(
            {
                "NEURON_RT_VISIBLE_CORES": core,
                **self.device_env,
                "NKI_HW_REQUIRE": "1",
                "NKI_HW_KERNELS": kernel,
                "NKI_HW_SHAPES": ctx.shapes,
                "NKI_HW_RESULTS": os.path.join(ctx.run, "hw_tests"),
                "PYTHONPATH": ctx.pythonpath,
            },
            ctx.python,
            "-m",
            "pytest",
            tests,
            "-m",
            "hardware",
            "-rs",
            f"--ignore={os.path.join(tests, 'test_device_benchmark.py')}",
            f"--ignore={ctx.constructs_test}",
            "-p",
            "no:cacheprovider",
            f"--junitxml={os.path.join(ctx.run, 'hw_tests', kernel + '.junit.xml')}",
        )
        return Step(f"hw_tests-{kernel}", "hw_tests", argv, ROOT, kernel=kernel, core=core)

    # -- step bodies
    def interpreter(self) -> Any:
        """Make ``import neuronxcc.nki`` resolve to the project's interpreter in this process.

        Only in a fresh process (``python -m nki_kernels.hw.job estimate|simulate``): a user's kernel
        module (``NKI_HW_KERNEL_<NAME>``, e.g. a CS149 ``conv2d.py``) imports ``neuronxcc`` itself, so
        without the alias it fails on a laptop, and on a trn2 it would hand the real SDK's ``nki.jit``
        objects to the interpreter.  Refuses if the real SDK is already loaded.
        """
        os.environ["NKI_BACKEND"] = "sim"  # before any kernel module import
        from nki_kernels.sim import (  # here: the job's own process has the standard library only
            alias_installed,
            install_neuronxcc_alias,
        )

        if "neuronxcc" in sys.modules and not alias_installed():
            raise RuntimeError(
                "the real neuronxcc is already imported in this process; the interpreter "
                "runs kernels only in a fresh one (use estimate_case / simulate_case)"
            )
        return install_neuronxcc_alias()

    def bench_case(
        self,
        case: Case,
        out_dir: str,
        *,
        warmup: int,
        iters: int,
        seed: int = DEFAULT_SEED,
        compile_opt: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Benchmark one case with ``nki.benchmark`` and write ``out_dir/bench.json``; returns the record."""
        os.makedirs(out_dir, exist_ok=True)
        args, kwargs = device.make_inputs(case, seed)
        kernel = device.load_kernel(case.kernel, self.api)
        neff = f"{stem(case)}.neff"
        cwd = os.getcwd()
        os.chdir(out_dir)  # nki.benchmark writes save_neff_name relative to the working directory
        try:
            lat = device.run_benchmark(
                kernel,
                args,
                kwargs,
                warmup=warmup,
                iters=iters,
                save_neff_name=neff,
                additional_compile_opt=compile_opt,
            )
        finally:
            os.chdir(cwd)
        record = {
            "kernel": case.kernel,
            "case": case.name,
            "params": case.p,
            "dtype": case.dtype,
            "api": self.label,
            "seed": seed,
            "warmup": lat.warmup,
            "iters": lat.iters,
            "latency_us": lat.percentiles_us,
            "p50_us": lat.p50,
            "p99_us": lat.p99,
            "kernel_impl": device.kernel_target(case.kernel, self.api),
            "additional_compile_opt": compile_opt,
            "core": os.environ.get("NEURON_RT_VISIBLE_CORES"),
            "instance_type": env.instance_type(),
            "sdk": env.sdk_info(),
            "neff": neff if os.path.exists(os.path.join(out_dir, neff)) else None,
            "cs149": cs149_verdict(lat.p99, case.threshold_us),
            "vs_estimate": estimate_ratio(lat.p50, lat.p99, os.path.join(out_dir, f"{stem(case)}.estimate.json")),
            "utc": _utc(),
            "note": "measured with nki.benchmark; thresholds and estimate ratios are reported, not asserted",
        }
        _write_json(os.path.join(out_dir, "bench.json"), record)
        return record

    # -- CLI
    def add_bench_options(self, p: argparse.ArgumentParser) -> None:
        super().add_bench_options(p)
        p.add_argument(
            "--compile-opt", default=None, help="additional_compile_opt for nki.benchmark, e.g. --disable-dge"
        )

    def bench_report(self, case: Case, a: argparse.Namespace) -> int:
        rec = self.bench_case(case, a.out, warmup=a.warmup, iters=a.iters, seed=a.seed, compile_opt=a.compile_opt)
        cs = rec["cs149"]
        print(
            f"{case.case_id}: p50 {rec['p50_us']:.1f} us, p99 {rec['p99_us']:.1f} us "
            f"(warmup {rec['warmup']}, iters {rec['iters']}, core {rec['core']})"
            + (f"; CS149: {cs['verdict']}" if cs else "")
        )
        return 0


NKI01 = Nki01Path()
bench_case = NKI01.bench_case
estimate_case = NKI01.estimate_case
simulate_case = NKI01.simulate_case
main = NKI01.main

if __name__ == "__main__":
    sys.exit(main())
