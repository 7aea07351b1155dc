"""Correctness on a NeuronCore: nki.baremetal and torch-neuronx vs references, sim vs device."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hw_support import SEED, case_ids, selected_cases
from nki_kernels.hw import device, torch_path

pytestmark = pytest.mark.hardware

CASES = selected_cases(correctness=True)
SIM_CASES = [c for c in CASES if c.sim_ok()]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_baremetal_matches_oracle(case):
    args, kwargs = device.make_inputs(case, SEED)
    out = device.run_baremetal(device.load_kernel(case.kernel), *args, **kwargs)
    device.assert_close(out, device.reference(case, args, kwargs), case.dtype, f"{case.case_id} (baremetal)")


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_torch_xla_matches_torch_cpu(case, xla_device):
    args, kwargs = device.make_inputs(case, SEED)
    module, inputs = torch_path.make_module(case.kernel, args, kwargs)
    out = torch_path.run_on_device(module, *inputs)
    ref = torch_path.torch_reference(case.kernel, *args, **kwargs)
    device.assert_close(out, ref, case.dtype, f"{case.case_id} (torch-neuronx vs torch CPU)")


def _interpreter_output(case, tmp_path):
    """The project's NumPy interpreter on the same seeded inputs, in a fresh process
    (kernel modules bind their NKI backend at import; here they are bound to neuronxcc)."""
    out = tmp_path / "sim.npy"
    env = dict(os.environ, NKI_BACKEND="sim")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nki_kernels.hw.job",
            "simulate",
            "--kernel",
            case.kernel,
            "--case",
            case.name,
            "--seed",
            str(SEED),
            "--out",
            str(out),
        ],
        env=env,
        check=True,
        timeout=1800,
    )
    return np.load(out)


@pytest.mark.parametrize("case", SIM_CASES, ids=case_ids(SIM_CASES))
def test_simulators_match_device(case, tmp_path, results_dir):
    """Device, the SDK's nki.simulate_kernel and the project interpreter, each vs the oracle.

    The pairwise differences are recorded in ``<results>/sim_vs_device/`` for triage.
    """
    args, kwargs = device.make_inputs(case, SEED)
    kernel = device.load_kernel(case.kernel)
    ref = device.reference(case, args, kwargs)
    outs = {
        "device": np.asarray(device.run_baremetal(kernel, *args, **kwargs), np.float64),
        "sdk_simulator": np.asarray(device.run_simulator(kernel, *args, **kwargs), np.float64),
        "interpreter": _interpreter_output(case, tmp_path),
    }
    record = {"kernel": case.kernel, "case": case.name, "seed": SEED, "max_abs_diff": {}}
    for a in outs:
        record["max_abs_diff"][f"{a}_vs_oracle"] = float(np.max(np.abs(outs[a] - ref)))
    for a, b in (("interpreter", "device"), ("sdk_simulator", "device"), ("interpreter", "sdk_simulator")):
        record["max_abs_diff"][f"{a}_vs_{b}"] = float(np.max(np.abs(outs[a] - outs[b])))
    folder = results_dir / "sim_vs_device"
    folder.mkdir(exist_ok=True)
    (folder / f"{case.kernel}_{case.name}.json").write_text(json.dumps(record, indent=2))
    for name, out in outs.items():
        device.assert_close(out, ref, case.dtype, f"{case.case_id} ({name})")
