"""Fake NKI 0.3.0 (Neuron SDK 2.29) for tests; the implementation is shared in ../../nki_common."""

import os as _os

__path__ = [_os.path.join(_os.path.dirname(__file__), "..", "..", "nki_common")]
__version__ = "0.3.0+fake"
from ._impl import Kernel, jit, simulate  # noqa: E402,F401
