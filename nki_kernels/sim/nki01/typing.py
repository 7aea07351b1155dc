"""``neuronxcc.nki.typing``: annotations only (no runtime effect in the interpreter)."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ..core.annotations import Annotation
from ..core.errors import not_implemented

if _TYPE_CHECKING:
    from typing import NoReturn

tensor = Annotation("tensor")
mutable_tensor = Annotation("mutable_tensor")
scalar = Annotation("scalar")


def __getattr__(name: str) -> NoReturn:
    if name.startswith("_"):
        raise AttributeError(name)
    raise not_implemented(f"nki.typing.{name}")
