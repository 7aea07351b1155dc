"""``neuronxcc.nki.typing``: annotations only (no runtime effect in the interpreter)."""

from ..core.annotations import Annotation
from ..core.errors import not_implemented

tensor = Annotation("tensor")
mutable_tensor = Annotation("mutable_tensor")
scalar = Annotation("scalar")


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.typing.{name}")
