"""``neuronxcc.nki.compiler``: scheduling/allocation directives are accepted as no-ops."""
from ..core.errors import SimTypeError, not_implemented
from .kernel import skip_middle_end_transformations  # noqa: F401
from .language import Buffer as _Buffer


class _AllocatableBuffer(_Buffer):
    """``ncc.sbuf`` / ``ncc.psum``: also ``.alloc(func)`` (2.26 ``compiler/sbuf.py``, ``psum.py``).

    ``func(idx, pdim_size, fdim_size)`` maps a block index to an address; the interpreter
    allocates automatically (like ``mod_alloc``), so only its callability is checked."""

    def alloc(self, func, *args, **kwargs):
        if not callable(func):
            raise SimTypeError("E010", f"nki.compiler.{self.name}.alloc", "func",
                               f"expected an allocation function (idx, pdim_size, fdim_size) -> address, got "
                               f"{type(func).__name__}", "Pass a function such as the SDK example's mod_alloc(...)")
        return self


sbuf = _AllocatableBuffer("sbuf")
psum = _AllocatableBuffer("psum")


def _identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


enable_stack_allocator = _identity_decorator
force_auto_alloc = _identity_decorator
multi_buffer = _identity_decorator
no_reorder = _identity_decorator
allocation_scope = _identity_decorator


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.compiler.{name}")

