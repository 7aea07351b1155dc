"""``nki.typing``: annotations for kernel parameters (``nt.tensor[128, 512]``); no runtime effect."""

from ..core.annotations import Annotation
from .adapt import module_getattr

tensor = Annotation("tensor")
mutable_tensor = Annotation("mutable_tensor")
scalar = Annotation("scalar")

__getattr__ = module_getattr("nki.typing")
