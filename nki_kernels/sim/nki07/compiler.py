"""``nki.compiler``: compiler directives, accepted as no-ops by the interpreter."""
from ._core import module_getattr
from .language import no_reorder, psum, sbuf  # noqa: F401


def skip_middle_end_transformations(kernel):
    """A compiler flag: ``affine_range`` runs in program order (never shuffled)."""
    from .nki import jit
    k = jit(kernel)
    k.skip_middle_end = True
    return k


def _identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


enable_stack_allocator = force_auto_alloc = multi_buffer = allocation_scope = _identity_decorator


__getattr__ = module_getattr("nki.compiler")
