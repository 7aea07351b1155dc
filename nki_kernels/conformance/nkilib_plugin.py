"""pytest plugin of the ``nki-library`` conformance suite (not used by CI): run nki-library's own
tests in its simulation mode (``--test-mode=simulation``) on the nki_kernels.sim NKI 0.7 front end,
and write one result per test for the runner.

nki-library's harness imports its CPU simulator as ``nki_cpu_simulator.nki.*`` and calls
``nki.cpu_simulate(kernel)[lnc](**inputs)``; this plugin provides those module names, pointing at
``nki_kernels.sim.nki07``.  It also stands in for what the public test tree imports but does not
contain (``test.utils.scripts``, ``test.utils.perf_analysis_private``, the SDK's ``neuron_dtypes``
and ``nki.compiler`` backends): none of them is on the simulation path.
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from collections.abc import Generator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import install_neuronxcc_alias, nki07
from nki_kernels.sim.nki07.collectives import run_ranks


class _Anything:
    """Placeholder object for names the simulation path never uses."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return _Anything()

    def __call__(self, *a, **k):
        return _Anything()


def _placeholder_module(name):
    m = types.ModuleType(name)
    m.__path__ = []

    def getattr_(attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return type(attr, (_Anything,), {})

    m.__getattr__ = getattr_
    sys.modules[name] = m
    return m


def _neuron_dtypes():
    """A NumPy stand-in for the SDK's neuron_dtypes (static_cast rounds and saturates to ints)."""
    m = types.ModuleType("neuron_dtypes")

    def static_cast(a, dtype):
        a, d = np.asarray(a), np.dtype(dtype)
        if d.kind in "iu" and a.dtype.kind == "f":
            info = np.iinfo(d)
            return np.clip(np.rint(a), info.min, info.max).astype(d)
        return a.astype(d)

    floats = {np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)}
    m.static_cast = static_cast
    m.is_float_type = lambda d: np.dtype(d).kind == "f" or np.dtype(d) in floats
    m.sizeinbytes = lambda d: np.dtype(d).itemsize
    m.finfo = ml_dtypes.finfo

    def getattr_(attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(ml_dtypes, attr, attr)

    m.__getattr__ = getattr_
    sys.modules["neuron_dtypes"] = m


root = types.ModuleType("nki_cpu_simulator")
root.__path__ = []
root.nki = nki07.nki  # type: ignore[attr-defined]
builtin = types.ModuleType("nki_cpu_simulator.nki.builtin")
sys.modules.update(
    {
        "nki_cpu_simulator": root,
        "nki_cpu_simulator.nki": nki07.nki,
        "nki_cpu_simulator.nki.builtin": builtin,
        "nki_cpu_simulator.nki.compiler": nki07.compiler,
        "nki_cpu_simulator.nki.isa": nki07.isa,
        "nki_cpu_simulator.nki.isa.constants": nki07.isa,
        "nki_cpu_simulator.nki.language": nki07.language,
        "nki_cpu_simulator.nki.language.dtypes": nki07.language,
        "nki_cpu_simulator.nki.tensor": nki07.tensor,
        "nki_cpu_simulator.nki.typing": nki07.typing,
    }
)
# `import a.b.c as x` looks the submodules up as attributes of their parents
nki07.nki.builtin, nki07.nki.tensor = builtin, nki07.tensor
setattr(nki07.isa, "constants", nki07.isa)  # noqa: B010  (a module attribute mypy cannot type)
nki07.language.dtypes = nki07.language
nki07.install_nki_alias()
# Some library modules also import the NKI 0.1 names for annotations (e.g. core/router_topk/
# router_topk.py: `import neuronxcc.nki.typing as nt`): the 0.1 alias too, keeping the default
# numerics (precision=None), as `nki-kernels run` does for a file importing both.
install_neuronxcc_alias(precision=None)
for _name in (
    "test.utils.scripts",
    "test.utils.scripts.remote_lock_scripts",
    "test.utils.perf_analysis_private",
    "nki.compiler.ncc_driver",
):
    _placeholder_module(_name)


class NKIFrontend:
    """``nki.compiler.frontend``'s front ends, which the library's trace-only tests (``@pytest.mark.trace_only``
    overrides the session's simulation mode) call through test/utils/kernel_tracer.py ``trace_kernel``:
    ``frontend.compile(kernel, inputs=..., lnc=...)``.  Here that runs the kernel on the interpreter, so a
    kernel_assert or an interpreter error raises where the real front end would; the returned module is a
    placeholder (only its debug dump uses it).  A placeholder front end never ran the kernel: the library's
    negative TensorView tests then failed with "DID NOT RAISE" and its trace-only tests passed unrun."""

    def compile(self, kernel: Any, inputs: dict | None = None, lnc: int | None = None, **_options: Any) -> Any:
        nki07.nki.cpu_simulate(kernel)[lnc or 1](**(inputs or {}))
        return _Anything()


class ParserFrontend(NKIFrontend):
    pass


class TracerFrontend(NKIFrontend):
    pass


_frontend = _placeholder_module("nki.compiler.frontend")
_frontend.NKIFrontend, _frontend.ParserFrontend, _frontend.TracerFrontend = NKIFrontend, ParserFrontend, TracerFrontend
_neuron_dtypes()


def pytest_configure(config: pytest.Config) -> None:
    """The library's harness writes each test's inputs and outputs under its ``--output-directory`` (default: the
    checkout's neuron_test_output/, 78 GB for a whole-library run): the runner's temporary folder instead."""
    artifacts = os.environ.get("NKI_CONFORMANCE_ARTIFACTS")
    if artifacts and hasattr(config.option, "output_directory"):
        config.option.output_directory = artifacts


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    from test.utils import test_orchestrator  # nki-library's own test package: on sys.path only inside its run

    orch = test_orchestrator.Orchestrator
    if not hasattr(orch, "_compiled_kernel"):
        orch._compiled_kernel = None  # unset on the harness's simulator path
    hook = getattr(orch, "_run_simulator_inference", None)
    if hook is not None and not getattr(hook, "_nki_ranks", False):
        orch._run_simulator_inference = _ranks_hook(hook)


# ---------------------------------------------------------------------------------------------- ranks
# The harness's simulator hook (test/utils/simulation_setup.py, d2ad3a5) runs one kernel call: for a test with
# InferenceArgs(collective_ranks=n > 1) it would pass a PerRankLazyInputGenerator to `.items()` and validate
# `output_worker_<r>/` directories it never writes.  For those tests this stand-in runs the kernel as n ranks
# (nki_kernels.sim.nki07.collectives.run_ranks: rank r gets `for_rank(r)`, or a copy of the one input dict)
# and writes each rank's outputs where the library's hardware path puts them (infer_result/output_worker_<r>/,
# test_orchestrator.py `_run_validation`).
def _ranks_hook(original: Any) -> Any:
    def run(self: Any, kut: Any) -> Any:
        n = kut.inference_args.collective_ranks
        if n <= 1:
            return original(self, kut)
        # both imports: nki-library's own test package, on sys.path only inside its run
        from test.utils.common_dataclasses import (
            INF_ARTIFACT_DIR_NAME,
            PerRankLazyInputGenerator,
            normalize_golden_output,
        )
        from test.utils.exceptions import InferenceException

        os.environ["NKI_NC_VERSION"] = kut.compiler_input.platform_target.get_nc_gen()
        given = kut.kernel_input or {}
        inputs = []
        for r in range(n):
            d = given.for_rank(r) if isinstance(given, PerRankLazyInputGenerator) else given
            # each rank its own arrays: a kernel may write its inputs in place (K8)
            inputs.append(
                {
                    k.removesuffix(".must_alias_input"): v.copy() if isinstance(v, np.ndarray) else v
                    for k, v in d.items()
                }
            )
        if kut.validation_args is None:
            raise ValueError("Simulation mode requires validation_args to verify outputs")
        try:
            outs = run_ranks(kut.kernel_func, inputs, lnc=kut.compiler_input.logical_nc_config)
        except Exception as e:
            raise InferenceException(str(e)) from e
        base = os.path.join(self.fs_config.artifacts_output_directory_path, INF_ARTIFACT_DIR_NAME)
        for r, out in enumerate(outs):
            golden = normalize_golden_output(kut.validation_args.golden_output, rank_id=r)
            got = [] if out is None else list(out) if isinstance(out, (list, tuple)) else [out]
            if len(got) != len(golden):
                raise InferenceException(
                    f"rank {r}: kernel returned {len(got)} outputs but expected {len(golden)} ({list(golden)})"
                )
            tensors = {name: np.asarray(o, dtype=g.dtype) for (name, g), o in zip(golden.items(), got, strict=True)}
            self.__dump_tensors__(os.path.join(base, f"output_worker_{r}"), tensors, lambda name: name)
        return base

    run._nki_ranks = True  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------------------------- results
# One JSON line per test to the file named by NKI_CONFORMANCE_RESULTS: the runner turns them into
# conformance Results (pass / fail = a test's expectation failed: AssertionError, pytest's Failed
# (pytest.raises' "DID NOT RAISE", pytest.fail) or the library's own ValidationException
# (test/utils/exceptions.py) / error = any other exception, e.g. its InferenceException around an
# interpreter error / xfail / xpass / skip).
_COMPARISON_FAILED = ("AssertionError", "Failed", "ValidationException")
_RESULTS = os.environ.get("NKI_CONFORMANCE_RESULTS")
_records: dict[str, dict] = {}
_started: dict[str, float] = {}  # nodeid -> process CPU time when its setup began


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _started[nodeid] = time.process_time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[Any, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    rep.nki_exception = call.excinfo.typename if call.excinfo is not None else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _RESULTS is None:
        return
    rec = _records.get(report.nodeid)
    wasxfail = hasattr(report, "wasxfail")
    if (
        report.when == "call"
        or (report.when == "setup" and not report.passed)
        or (report.when == "teardown" and report.failed)
    ):
        if report.skipped and wasxfail:
            outcome = "xfail"
        elif report.passed and wasxfail:
            outcome = "xpass"
        elif report.skipped:
            outcome = "skip"
        elif report.passed:
            outcome = "pass"
        elif report.when == "call" and getattr(report, "nki_exception", None) in _COMPARISON_FAILED:
            outcome = "fail"
        else:
            outcome = "error"
        message = ""
        if not report.passed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            if report.skipped and isinstance(report.longrepr, tuple):
                message = str(report.longrepr[2])
        if rec is None or outcome in ("fail", "error"):
            rec = {
                "id": report.nodeid,
                "file": report.location[0],
                "outcome": outcome,
                "seconds": report.duration + (rec["seconds"] if rec else 0.0),
                "cpu": time.process_time() - _started.get(report.nodeid, time.process_time()),
                "message": message[:600],
            }
            _records[report.nodeid] = rec
            with open(_RESULTS, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
