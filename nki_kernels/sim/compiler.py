"""``neuronxcc.nki.compiler``: scheduling/allocation directives are accepted as no-ops."""
from .errors import not_implemented
from .language import Buffer as _Buffer
from .runner import skip_middle_end_transformations  # noqa: F401

sbuf = _Buffer("sbuf")
psum = _Buffer("psum")


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
