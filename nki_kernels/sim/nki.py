"""The top-level ``neuronxcc.nki`` namespace of the interpreter."""
from . import compiler, isa, language, typing  # noqa: F401
from .errors import not_implemented
from .tensor import Tensor as tensor  # noqa: F401  (nki.tensor, 2.26 nki docs: the tensor class)
from .runner import (Kernel, baremetal, benchmark, jit, profile, simulate_kernel, trace,  # noqa: F401
                     trace_kernel)


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.{name}")
