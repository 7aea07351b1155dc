"""``neuronxcc.nki.compiler``: direct allocation (``sbuf``/``psum`` ``alloc``/``mod_alloc``, checked by
nki01/allocation.py), the allocator decorators; scheduling directives are accepted as no-ops."""

from __future__ import annotations

import copy as _copy
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ..core.errors import SimTypeError, not_implemented
from .allocation import Placement as _Placement
from .kernel import jit as _jit
from .kernel import skip_middle_end_transformations  # noqa: F401
from .language import Buffer as _Buffer

if _TYPE_CHECKING:
    from typing import NoReturn


class _AllocatableBuffer(_Buffer):
    """``ncc.sbuf`` / ``ncc.psum``: also ``.alloc(func)`` (2.26 ``compiler/sbuf.py``, ``psum.py``).

    ``func(idx, pdim_size, fdim_size)`` maps a block index to a physical tile; the placement is
    evaluated for every block when a tensor is declared (nki01/allocation.py)."""

    def alloc(self, func, *args, **kwargs):
        if not callable(func):
            raise SimTypeError(
                "E010",
                f"nki.compiler.{self.name}.alloc",
                "func",
                f"expected an allocation function (idx, pdim_size, fdim_size) -> address, got {type(func).__name__}",
                "Pass a function such as the SDK example's mod_alloc(...)",
            )
        return _Buffer(self.name, None, _Placement(self.name, "alloc", func=func))


sbuf = _AllocatableBuffer("sbuf")
psum = _AllocatableBuffer("psum")


def _identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


def _kernel_flag(flag):
    """A decorator that marks the (jitted) kernel with ``flag`` (read when it runs)."""

    def deco(func=None, **kwargs):
        if func is None:
            return deco
        k = _copy.copy(_jit(func))
        setattr(k, flag, True)
        return k

    return deco


# CMP enable_stack_allocator: "Must use together with skip_middle_end_transformations" (checked at run time)
enable_stack_allocator = _kernel_flag("stack_allocator")
# CMP force_auto_alloc: "ignore any direct allocation inside the kernel"
force_auto_alloc = _kernel_flag("force_auto_alloc")
multi_buffer = _identity_decorator
no_reorder = _identity_decorator
allocation_scope = _identity_decorator


def __getattr__(name: str) -> NoReturn:
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.compiler.{name}")
