"""Fake smoke-test constructs (NumPy stand-ins in the fake ``nki.jit``), selected with
``NKI_HW_SMOKE_MODULE=fake_constructs07``.  ``FAKE_SMOKE_FAIL=<name>`` makes that construct
return wrong values, to test how run_hw.sh reports a failing construct.  Not NKI code."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import nki
import numpy as np


@dataclass(frozen=True)
class Construct:
    name: str
    used_by: str
    flag: str | None
    fn: object
    dtype: str = "float32"

    @property
    def kernel(self) -> Any:
        def body(*args: Any) -> Any:
            out = self.fn(*args)
            return out + 1.0 if os.environ.get("FAKE_SMOKE_FAIL") == self.name else out

        body.__name__ = self.name
        return nki.jit(body)

    def inputs(self) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(0)
        return (rng.standard_normal((128, 64), dtype=np.float32),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return self.fn(x)


CONSTRUCTS = [
    Construct("copy_roundtrip", "all kernels", None, lambda x: x.copy()),
    Construct("row_max", "attention", "--fake-flag", lambda x: x.max(axis=1, keepdims=True)),
]
