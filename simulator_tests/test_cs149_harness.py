"""The CS149 part2 flow end to end: `nki-kernels run test_harness.py --simulate --test_maxpool` in
a part2-shaped folder, with our own CS149-shaped harness (simulator_tests/data/cs149_part2/harness.py; the
official harnesses stay outside the project), a correct and a wrong solution.

The harness does what both official starters do at import and in --simulate mode (import
neuronxcc.nki, `logging.disable(logging.OFF)`, nki.simulate_kernel per case, then
nki.benchmark), so this is the path that used to die at import (issue 8 item 13)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "cs149_part2"


def _part2(tmp_path, solution):
    d = tmp_path / "part2"
    d.mkdir()
    shutil.copy(DATA / "harness.py", d / "test_harness.py")     # named as in the starters (kept
    shutil.copy(DATA / "conv2d_reference.py", d)               # otherwise so pytest does not collect it)
    shutil.copy(DATA / solution, d / "conv2d.py")
    return d


def _run(d):
    return subprocess.run([sys.executable, "-m", "nki_kernels.cli", "run", "test_harness.py", "--simulate",
                           "--test_maxpool"], cwd=d, capture_output=True, text=True, timeout=600)


def test_correct_solution_passes_all_four_correctness_tests(tmp_path):
    p = _run(_part2(tmp_path, "conv2d_correct.py"))
    assert p.stdout.count("Passed") == 4, p.stdout + p.stderr
    assert "Failed" not in p.stdout and "Correctness: 4/4 passed" in p.stdout
    # then the harness times the kernel: without a device that is the coded needs-a-device error
    assert p.returncode != 0 and "E099" in p.stderr and "nki.benchmark" in p.stderr


def test_wrong_solution_fails_the_bias_cases(tmp_path):
    p = _run(_part2(tmp_path, "conv2d_wrong.py"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("Passed") == 2 and p.stdout.count("Failed") == 2, p.stdout
    assert "Output mismatch" in p.stdout and "Correctness failed, skipping performance tests." in p.stdout


def test_importing_neuronxcc_defines_logging_off(tmp_path):
    d = _part2(tmp_path, "conv2d_correct.py")
    (d / "probe.py").write_text("import logging, neuronxcc.nki\nprint('OFF', logging.OFF > logging.CRITICAL)\n")
    p = subprocess.run([sys.executable, "-m", "nki_kernels.cli", "run", "probe.py"], cwd=d, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "OFF True" in p.stdout, p.stdout + p.stderr
