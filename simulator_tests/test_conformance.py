"""`nki-kernels conformance PATH` on a tiny fake SDK checkout (PATH/nki/test) made here.

The fake tests import `neuronxcc.nki` as the SDK's examples do; one method each passes, fails
(a golden value differs), errors (an interpreter error / a missing name), is marked xfail, is
a unittest expected failure, is skipped, and one module-level `@nki.jit def test_*` kernel must
not be collected.  Every method runs in its own process, so this also proves the alias works
in a fresh interpreter.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from nki_kernels import conformance

_KERNELS = '''
import unittest
import pytest
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit(mode="simulation")
def add_one(a):
  out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
  nl.store(out, nl.add(nl.load(a), 1.0))
  return out


@nki.jit(mode="simulation")
def test_kernel_named_like_a_test(a):   # a kernel, not a test: pytest collects plain functions only
  return a


class TestFake(unittest.TestCase):
  def test_pass(self):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    self.assertTrue(np.allclose(add_one(a), a + 1))

  def test_fail(self):
    a = np.zeros((2, 4), np.float32)
    self.assertTrue(np.allclose(add_one(a), a + 2))

  def test_error(self):
    nl.load(np.zeros((2, 2), np.float32))     # an NKI API outside a kernel: E019

  @pytest.mark.xfail(reason="FAKE-1")
  def test_marked_xfail(self):
    assert False

  @pytest.mark.xfail(reason="FAKE-2")
  def test_marked_xfail_passes(self):
    pass

  @unittest.expectedFailure
  def test_expected_failure(self):
    self.assertEqual(1, 2)

  @unittest.skip("not on this platform")
  def test_skipped(self):
    raise RuntimeError("must not run")


def test_module_level_function():
  assert add_one(np.ones((1, 1), np.float32))[0, 0] == 2.0
'''

_BROKEN_IMPORT = '''
import neuronxcc.nki.language as nl
nl.this_api_does_not_exist_anywhere
class TestNever:
  def test_a(self):
    pass
'''


@pytest.fixture()
def fake_sdk(tmp_path):
    d = tmp_path / "sdk" / "nki" / "test"
    d.mkdir(parents=True)
    (d / "test_fake_kernels.py").write_text(textwrap.dedent(_KERNELS))
    (d / "test_fake_broken.py").write_text(textwrap.dedent(_BROKEN_IMPORT))
    (d / "helper_not_a_test.py").write_text("raise SystemExit('never imported')\n")
    return tmp_path / "sdk"


def test_discovery_is_static_and_skips_kernels(fake_sdk):
    ids = [i.nodeid for i in conformance.discover(str(fake_sdk))]
    assert ids == [
        "test_fake_broken.py::TestNever::test_a",
        "test_fake_kernels.py::TestFake::test_pass",
        "test_fake_kernels.py::TestFake::test_fail",
        "test_fake_kernels.py::TestFake::test_error",
        "test_fake_kernels.py::TestFake::test_marked_xfail",
        "test_fake_kernels.py::TestFake::test_marked_xfail_passes",
        "test_fake_kernels.py::TestFake::test_expected_failure",
        "test_fake_kernels.py::TestFake::test_skipped",
        "test_fake_kernels.py::test_module_level_function",
    ]


def test_runner_outcomes_per_method(fake_sdk, tmp_path):
    out = tmp_path / "conf.json"
    proc = subprocess.run([sys.executable, "-m", "nki_kernels.cli", "conformance", str(fake_sdk), "--json", str(out),
                           "--timeout", "120", "--jobs", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr     # a failure and errors -> non-zero
    rec = json.loads(out.read_text())
    got = {r["nodeid"].split("::")[-1]: r for r in rec["results"]}
    assert {k: v["outcome"] for k, v in got.items()} == {
        "test_a": "error", "test_pass": "pass", "test_fail": "fail", "test_error": "error",
        "test_marked_xfail": "xfail", "test_marked_xfail_passes": "xpass", "test_expected_failure": "xfail",
        "test_skipped": "skip", "test_module_level_function": "pass"}
    assert "this_api_does_not_exist_anywhere" in got["test_a"]["message"] and "import" in got["test_a"]["message"]
    assert "E019" in got["test_error"]["message"]
    assert "AssertionError" in got["test_fail"]["message"]
    assert "FAKE-1" in got["test_marked_xfail"]["message"]
    assert rec["summary"] == {"pass": 2, "fail": 1, "error": 2, "xfail": 2, "xpass": 1, "skip": 1}
    assert rec["files"]["test_fake_kernels.py"]["pass"] == 2
    assert rec["sdk_commit"] == "unknown"       # not a git checkout
    # the printed report: one line per method, the per-file table and the summary line
    assert "FAIL   test_fake_kernels.py::TestFake::test_fail" in proc.stdout
    assert "| test_fake_kernels.py | 8 | 2 | 1 | 1 | 2 | 1 xpass, 1 skip |" in proc.stdout
    assert "9 test methods: 2 pass, 1 fail, 2 error, 2 xfail, 1 xpass, 1 skip" in proc.stdout
    # nothing was written into the third-party folder (no __pycache__)
    assert sorted(p.name for p in (fake_sdk / "nki" / "test").iterdir()) == [
        "helper_not_a_test.py", "test_fake_broken.py", "test_fake_kernels.py"]


def test_timeout_is_an_error(tmp_path):
    d = tmp_path / "nki" / "test"
    d.mkdir(parents=True)
    (d / "test_slow.py").write_text("import time\nclass TestSlow:\n  def test_sleep(self):\n    time.sleep(30)\n")
    results, commit, _ = conformance.run(str(tmp_path), timeout=3, out=lambda s: None)
    assert [r.outcome for r in results] == ["error"]
    assert "timeout" in results[0].message


def test_filter_and_all_green_exit_status(fake_sdk):
    proc = subprocess.run([sys.executable, "-m", "nki_kernels.cli", "conformance", str(fake_sdk), "-k", "test_pass"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 test methods: 1 pass, 0 fail, 0 error" in proc.stdout


@pytest.mark.parametrize("argv, needle", [
    ([], "missing PATH"),
    (["/nonexistent/sdk"], "is not a directory"),
    (["{tmp}"], "no test_*.py files"),
    (["{tmp}", "--timeout", "0"], "--timeout must be > 0"),
])
def test_usage_errors(argv, needle, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "nki_kernels.cli", "conformance", *argv], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert needle in proc.stderr


def test_worker_refuses_wrong_arguments():
    proc = subprocess.run([sys.executable, "-m", "nki_kernels.conformance"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "nki-kernels conformance PATH" in proc.stderr
