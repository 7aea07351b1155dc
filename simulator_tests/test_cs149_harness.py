"""The CS149 part2 flow end to end: `nki-kernels run test_harness.py --simulate --test_maxpool` in a
part2-shaped folder, with our own CS149-shaped harness (simulator_tests/data/cs149_like/part2_harness.py,
shared with test_cli_estimate_benchmark.py; the official harnesses stay outside the project), a
correct and a wrong solution written as students write them.

The harness does what both official starters do at import and in --simulate mode (import
neuronxcc.nki, `logging.disable(logging.OFF)`, nki.simulate_kernel per case, then nki.benchmark),
so this is the path that used to die at import (`logging.OFF` missing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "cs149_like"


def _part2(tmp_path: Path, solution: str) -> Path:
    d = tmp_path / "part2"
    d.mkdir()
    shutil.copy(DATA / "part2_harness.py", d / "test_harness.py")  # named as in the starters (kept
    shutil.copy(DATA / solution, d / "conv2d.py")  # otherwise so pytest does not collect it)
    return d


def _run(d: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", "test_harness.py", "--simulate", "--test_maxpool"],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_correct_solution_passes_all_four_correctness_tests(tmp_path: Path) -> None:
    p = _run(_part2(tmp_path, "conv2d_2024_style.py"))
    assert p.stdout.count("Passed") == 4, p.stdout + p.stderr
    assert "Failed" not in p.stdout
    # then the harness times the kernel: without a device that is the coded needs-a-device error
    assert p.returncode != 0 and "E099" in p.stderr and "nki.benchmark" in p.stderr
    assert "Execution Time" not in p.stdout


def test_wrong_solution_fails_the_bias_cases(tmp_path: Path) -> None:
    p = _run(_part2(tmp_path, "conv2d_wrong_bias.py"))
    assert p.returncode == 0, p.stdout + p.stderr  # the official harnesses exit() with status 0 here
    assert p.stdout.count("Passed") == 2 and p.stdout.count("Failed") == 2, p.stdout
    assert "Output mismatch" in p.stdout and "Correctness failed, skipping performance tests." in p.stdout


def test_importing_neuronxcc_defines_logging_off(tmp_path: Path) -> None:
    d = _part2(tmp_path, "conv2d_2024_style.py")
    (d / "probe.py").write_text("import logging, neuronxcc.nki\nprint('OFF', logging.OFF > logging.CRITICAL)\n")
    p = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", "probe.py"], cwd=d, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0 and "OFF True" in p.stdout, p.stdout + p.stderr
