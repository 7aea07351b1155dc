"""Shared helpers of the hardware tests (a plain module, so test files can import it)."""

from __future__ import annotations

import os

from nki_kernels.kernels import registry

SEED = 0  # identical seeded inputs for device, simulators and oracles


def require_hardware() -> bool:
    return os.environ.get("NKI_HW_REQUIRE", "") == "1"


def selected_cases(**role) -> list:
    """Cases picked by NKI_HW_KERNELS / NKI_HW_SHAPES (collection fails loudly on typos)."""
    return registry.select(os.environ.get("NKI_HW_KERNELS"), os.environ.get("NKI_HW_SHAPES", "cs149"), **role)


def case_ids(cases) -> list[str]:
    return [c.case_id for c in cases]
