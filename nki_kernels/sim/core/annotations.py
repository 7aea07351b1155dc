"""Kernel-parameter annotations (``nt.tensor[128, 512]``, ``nt.mutable_tensor``, ``nt.scalar``): no
runtime effect in the interpreter; both front ends' ``typing`` namespaces instantiate them."""

from __future__ import annotations

from typing import Any


class Annotation:
    """An annotation object: subscriptable and callable, always itself."""

    def __init__(self, name: str):
        self.name = name

    def __getitem__(self, item: Any) -> Annotation:
        return self

    def __call__(self, *a: Any, **k: Any) -> Annotation:
        return self

    def __repr__(self) -> str:
        return f"nt.{self.name}"
