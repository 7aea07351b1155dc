"""pytest plugin (used by scripts/conform07.py, not by CI): run nki-library's own tests in its
simulation mode (``--test-mode=simulation``) on the nki_kernels.sim NKI 0.7 front end.

nki-library's harness imports its CPU simulator as ``nki_cpu_simulator.nki.*`` and calls
``nki.cpu_simulate(kernel)[lnc](**inputs)``; this plugin provides those module names, pointing at
``nki_kernels.sim.nki07``.  It also stands in for what the public test tree imports but does not
contain (``test.utils.scripts``, ``test.utils.perf_analysis_private``, the SDK's ``neuron_dtypes``
and ``nki.compiler`` backends): none of them is on the simulation path.
"""
from __future__ import annotations

import os
import sys
import types

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nki_kernels.sim import nki07  # noqa: E402


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
root.nki = nki07.nki
builtin = types.ModuleType("nki_cpu_simulator.nki.builtin")
sys.modules.update({
    "nki_cpu_simulator": root, "nki_cpu_simulator.nki": nki07.nki, "nki_cpu_simulator.nki.builtin": builtin,
    "nki_cpu_simulator.nki.compiler": nki07.compiler, "nki_cpu_simulator.nki.isa": nki07.isa,
    "nki_cpu_simulator.nki.isa.constants": nki07.isa, "nki_cpu_simulator.nki.language": nki07.language,
    "nki_cpu_simulator.nki.language.dtypes": nki07.language, "nki_cpu_simulator.nki.tensor": nki07.tensor,
    "nki_cpu_simulator.nki.typing": nki07.typing})
# `import a.b.c as x` looks the submodules up as attributes of their parents
nki07.nki.builtin, nki07.nki.tensor = builtin, nki07.tensor
nki07.isa.constants = nki07.isa
nki07.language.dtypes = nki07.language
nki07.install_nki_alias()
for _name in ("test.utils.scripts", "test.utils.scripts.remote_lock_scripts", "test.utils.perf_analysis_private",
              "nki.compiler.frontend", "nki.compiler.ncc_driver"):
    _placeholder_module(_name)
_neuron_dtypes()


def pytest_collection_modifyitems(session, config, items):
    from test.utils import test_orchestrator
    if not hasattr(test_orchestrator.Orchestrator, "_compiled_kernel"):
        test_orchestrator.Orchestrator._compiled_kernel = None   # unset on the harness's simulator path
