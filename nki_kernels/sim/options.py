"""Compatibility path: the interpreter's options live in ``nki_kernels.sim.core.options``."""

from .core.options import SimOptions, _from_env, default_options, set_default_options  # noqa: F401
