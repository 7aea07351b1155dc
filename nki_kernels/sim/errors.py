"""Compatibility path: the coded errors live in ``nki_kernels.sim.core.errors``."""

from .core.errors import *  # noqa: F401,F403
from .core.errors import CODES, NKISyntaxError, SimError, SimRuntimeError, SimValueError  # noqa: F401
