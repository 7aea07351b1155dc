"""``nki.typing``: annotations for kernel parameters (``nt.tensor[128, 512]``); no runtime effect."""
from ._core import module_getattr


class _Annotation:
    def __init__(self, name):
        self.name = name

    def __getitem__(self, item):
        return self

    def __call__(self, *a, **k):
        return self

    def __repr__(self):
        return f"nt.{self.name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
scalar = _Annotation("scalar")


__getattr__ = module_getattr("nki.typing")
