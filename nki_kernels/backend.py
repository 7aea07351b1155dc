"""The one place kernels get their NKI names from: ``from nki_kernels.backend import nki, nl, nisa``.

Resolved once per process from ``NKI_BACKEND``:
  auto    (default) real ``neuronxcc.nki`` when importable (Neuron SDK 2.26/2.27), else the interpreter
  sim     always the NumPy interpreter (nki_kernels.sim)
  neuron  the real SDK; ImportError with install instructions if it is missing
A port to the NKI 0.2+ ``nki.*`` namespace is a change to this file only.
"""
from __future__ import annotations

import importlib
import os

_choice = os.environ.get("NKI_BACKEND", "auto").strip().lower() or "auto"
if _choice not in ("auto", "sim", "neuron"):
    raise ValueError(f"NKI_BACKEND={_choice!r}: allowed values are auto, sim, neuron")


def _real():
    mod = importlib.import_module("neuronxcc.nki")
    if getattr(importlib.import_module("neuronxcc"), "__nki_kernels_sim__", False):
        raise ImportError("neuronxcc is the nki_kernels.sim alias, not the Neuron SDK")
    return (mod, importlib.import_module("neuronxcc.nki.language"), importlib.import_module("neuronxcc.nki.isa"))


def _sim():
    from .sim import isa, language, nki
    return nki, language, isa


if _choice == "sim":
    nki, nl, nisa = _sim()
    NAME = "sim"
elif _choice == "neuron":
    try:
        nki, nl, nisa = _real()
    except ImportError as e:
        raise ImportError(
            "NKI_BACKEND=neuron but neuronxcc.nki is not importable. Install neuronx-cc from the Neuron "
            "package repository (SDK 2.26/2.27; see README 'Hardware runbook'), or use NKI_BACKEND=sim") from e
    NAME = "neuron"
else:
    try:
        nki, nl, nisa = _real()
        NAME = "neuron"
    except ImportError:
        nki, nl, nisa = _sim()
        NAME = "sim"

simulate_kernel = nki.simulate_kernel
