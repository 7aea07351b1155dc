"""``nki.typing``: annotations for kernel parameters (``nt.tensor[128, 512]``); no runtime effect.

The same annotation objects as the NKI 0.1 front end's ``neuronxcc.nki.typing``."""
from ..typing import mutable_tensor, scalar, tensor  # noqa: F401
from ._core import module_getattr

__getattr__ = module_getattr("nki.typing")
