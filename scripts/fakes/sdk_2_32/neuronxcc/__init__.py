"""Fake neuronx-cc 2.27 (Neuron SDK 2.32): ``neuronxcc.nki`` is importable (the 2.26 fake's,
through ``__path__``) but kernels using it no longer compile from SDK 2.30 on, and
``baremetal`` returns all-zero outputs on 2.32 (nki-samples#134): run_hw.sh must refuse it."""

import os as _os

__path__.append(_os.path.join(_os.path.dirname(__file__), "..", "..", "sdk", "neuronxcc"))
__version__ = "2.27.5334.0+fake"
