"""Fake neuronx-cc 2.24 (Neuron SDK 2.29): ``neuronxcc.nki`` still ships (deprecated; the 2.29
release notes postpone its removal), here the 2.26 fake's, found through ``__path__``."""

import os as _os

__path__.append(_os.path.join(_os.path.dirname(__file__), "..", "..", "sdk", "neuronxcc"))
__version__ = "2.24.8799.0+fake"
