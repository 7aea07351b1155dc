"""``nki.compiler``: compiler directives, accepted as no-ops by the interpreter."""

from .adapt import module_getattr
from .kernel import skip_middle_end_transformations  # noqa: F401
from .language import no_reorder, psum, sbuf  # noqa: F401


def _identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


enable_stack_allocator = force_auto_alloc = multi_buffer = allocation_scope = _identity_decorator


__getattr__ = module_getattr("nki.compiler")
