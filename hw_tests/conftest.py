"""Hardware tests: run only on a trn2 instance with Neuron SDK 2.26/2.27 (``neuronxcc.nki``).

Every test here carries the ``hardware`` marker.  Elsewhere they are collected and then
skipped with the reason (no ``/dev/neuron*`` device, SDK without ``neuronxcc.nki``,
``NKI_BACKEND=sim``), never passed silently.  With ``NKI_HW_REQUIRE=1`` (what
``scripts/run_hw.sh`` sets) a missing requirement is a usage error (exit code 4) instead
of a skip, so a hardware job cannot "pass" by skipping everything.

Environment: ``NKI_HW_KERNELS`` (comma list or ``all``), ``NKI_HW_SHAPES``
(``quick|cs149|full``, default ``cs149``), ``NKI_HW_RESULTS`` (folder for JSON records;
default a pytest temporary folder), ``NKI_HW_WARMUP`` / ``NKI_HW_ITERS`` (benchmark).
"""

from __future__ import annotations

import os
import pathlib

import pytest

from hw_support import require_hardware
from nki_kernels.hw import env


def pytest_collection_modifyitems(config, items):
    hw_items = [item for item in items if item.get_closest_marker("hardware")]
    if not hw_items:
        return
    reason = env.hardware_skip_reason()
    if reason is None:
        return
    if require_hardware():
        raise pytest.UsageError(f"NKI_HW_REQUIRE=1 but the hardware tests cannot run: {reason}")
    skip = pytest.mark.skip(reason=f"hardware: {reason}")
    for item in hw_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory) -> pathlib.Path:
    path = os.environ.get("NKI_HW_RESULTS")
    folder = pathlib.Path(path) if path else tmp_path_factory.mktemp("hw_results")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def xla_device():
    """The torch-xla device; a failure under NKI_HW_REQUIRE=1, a skip otherwise."""
    try:
        import torch_neuronx  # noqa: F401  (registers the Neuron XLA backend)
        import torch_xla.core.xla_model as xm
    except ImportError as e:
        msg = f"torch-neuronx / torch_xla not importable ({e}); use a DLAMI PyTorch venv"
        if require_hardware():
            pytest.fail(msg)
        pytest.skip(msg)
    return xm.xla_device()
