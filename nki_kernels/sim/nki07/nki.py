"""The top-level ``nki`` namespace of NKI 0.6/0.7 on the interpreter (docs/nki-0.7-spec.md §1).

``@nki.jit`` kernels take HBM tensors (NumPy arrays, or CPU torch tensors) and return the
``nl.shared_hbm`` tensors they allocate.  ``kernel[lnc]`` launches on ``lnc`` logical cores
(``nl.program_id()`` is the core index).  Calling a kernel, or ``nki.simulate(kernel)(*args)``,
runs it in the interpreter; inside another kernel a jitted kernel runs inline.
"""

from __future__ import annotations

from . import compiler, isa, language, typing  # noqa: F401
from .adapt import module_getattr
from .kernel import Kernel, cpu_simulate, dtype, jit, simulate, simulator_requested, trace  # noqa: F401

__getattr__ = module_getattr("nki")
