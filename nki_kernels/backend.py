"""The one place kernels get their NKI names from.

NKI 0.1 kernels (``neuronxcc.nki``, SDK 2.26/2.27)::

    from nki_kernels.backend import nki, nl, nisa

NKI 0.7 kernels (``import nki``, SDK 2.33; 0.6 is the documented baseline)::

    from nki_kernels.backend import resolve
    nki, nl, nisa = resolve("0.7").modules

Each API version is resolved once per process from ``NKI_BACKEND``:
  auto    (default) the real Neuron SDK package when importable, else the interpreter
  sim     always the NumPy interpreter (nki_kernels.sim for 0.1, nki_kernels.sim.nki07 for 0.7)
  neuron  the real SDK; ImportError with install instructions if it is missing
For 0.7, ``NKI_SIMULATOR=1`` (the SDK's own switch to its CPU simulator) also selects the
interpreter.  PyPI's placeholder ``nki`` package (no ``nki.jit``) never counts as the real SDK.
Which APIs a kernel file is written against (from its imports): ``userkernel.apis_of_source``.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, NamedTuple

API_VERSIONS = ("0.1", "0.7")

_choice = os.environ.get("NKI_BACKEND", "auto").strip().lower() or "auto"
if _choice not in ("auto", "sim", "neuron"):
    raise ValueError(f"NKI_BACKEND={_choice!r}: allowed values are auto, sim, neuron")


class Backend(NamedTuple):
    api: str  # "0.1" | "0.7"
    name: str  # "sim" | "neuron"
    nki: Any  # the API's modules (real or the interpreter's); attributes are NKI's
    nl: Any
    nisa: Any

    @property
    def modules(self) -> tuple[Any, Any, Any]:
        return self.nki, self.nl, self.nisa


def _real_01():
    mod = importlib.import_module("neuronxcc.nki")
    if getattr(importlib.import_module("neuronxcc"), "__nki_kernels_sim__", False):
        raise ImportError("neuronxcc is the nki_kernels.sim alias, not the Neuron SDK")
    return (mod, importlib.import_module("neuronxcc.nki.language"), importlib.import_module("neuronxcc.nki.isa"))


def _real_07():
    mod = importlib.import_module("nki")
    if getattr(mod, "__nki_kernels_sim__", False):
        raise ImportError("nki is the nki_kernels.sim alias, not the Neuron SDK")
    if not callable(getattr(mod, "jit", None)):
        raise ImportError("the installed `nki` has no nki.jit (PyPI's placeholder package, not the Neuron SDK)")
    return mod, importlib.import_module("nki.language"), importlib.import_module("nki.isa")


def _sim_01():
    from .sim import isa, language, nki  # here: the interpreter loads only when chosen (not beside the real SDK)

    return nki, language, isa


def _sim_07():
    from .sim.nki07 import isa, language, nki  # here: the interpreter loads only when chosen (not beside the real SDK)

    return nki, language, isa


_IMPL = {
    "0.1": (_real_01, _sim_01, "neuronxcc.nki", "neuronx-cc, SDK 2.26/2.27"),
    "0.7": (_real_07, _sim_07, "nki", "the nki package, SDK >= 2.33"),
}
_cache: dict = {}


def resolve(api: str = "0.1") -> Backend:
    """The NKI implementation for API ``api`` ("0.1" or "0.7"), resolved once per process."""
    if api not in _IMPL:
        raise ValueError(f"resolve(api={api!r}): allowed API versions are {', '.join(API_VERSIONS)}")
    if api in _cache:
        return _cache[api]
    real, sim, mod, pkg = _IMPL[api]
    choice = _choice
    if api == "0.7" and choice == "auto" and os.environ.get("NKI_SIMULATOR", "").strip() in ("1", "true", "yes"):
        choice = "sim"
    if choice == "sim":
        b = Backend(api, "sim", *sim())
    elif choice == "neuron":
        try:
            b = Backend(api, "neuron", *real())
        except ImportError:
            raise ImportError(
                f"NKI_BACKEND=neuron but {mod} is not importable (NKI {api}: {pkg}). Install it from the Neuron "
                "package repository (see README 'Hardware runbook'), or use NKI_BACKEND=sim"
            ) from None
    else:
        try:
            b = Backend(api, "neuron", *real())
        except ImportError:
            b = Backend(api, "sim", *sim())
    _cache[api] = b
    return b


# Module-level names: the NKI 0.1 API (what the project's kernels import today).
_b01 = resolve("0.1")
nki, nl, nisa = _b01.modules
NAME = _b01.name
simulate_kernel = nki.simulate_kernel
