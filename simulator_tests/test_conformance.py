"""`nki-kernels conformance`, the one runner of public NKI code, on tiny fake checkouts made here.

sdk-tests (NKI 0.1): the fake tests import `neuronxcc.nki` as the SDK's examples do; one method
each passes, fails (a golden value differs), errors (an interpreter error / a missing name), is
marked xfail, is a unittest expected failure, is skipped, and one module-level `@nki.jit def
test_*` kernel must not be collected.  Every method runs in its own process, so this also proves
the alias works in a fresh interpreter.

sdk-examples / sdk-docstrings (NKI 0.7) and nki-library: their pieces on fake examples, snippets
and a fake library tree (its conftest, its orchestrator module), through the same result type.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from nki_kernels.conformance import nkilib, sdk07, sdk_tests

_KERNELS = """
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
"""

_BROKEN_IMPORT = """
import neuronxcc.nki.language as nl
nl.this_api_does_not_exist_anywhere
class TestNever:
  def test_a(self):
    pass
"""


@pytest.fixture()
def fake_sdk(tmp_path):
    d = tmp_path / "sdk" / "nki" / "test"
    d.mkdir(parents=True)
    (d / "test_fake_kernels.py").write_text(textwrap.dedent(_KERNELS))
    (d / "test_fake_broken.py").write_text(textwrap.dedent(_BROKEN_IMPORT))
    (d / "helper_not_a_test.py").write_text("raise SystemExit('never imported')\n")
    return tmp_path / "sdk"


def test_discovery_is_static_and_skips_kernels(fake_sdk):
    ids = [i.nodeid for i in sdk_tests.discover(str(fake_sdk))]
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
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nki_kernels.cli",
            "conformance",
            str(fake_sdk),
            "--json",
            str(out),
            "--timeout",
            "120",
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a failure and errors -> non-zero
    rec = json.loads(out.read_text())
    assert {r["suite"] for r in rec["results"]} == {"sdk-tests"}  # the fake checkout has only nki/test
    got = {r["id"].split("::")[-1]: r for r in rec["results"]}
    assert {k: v["outcome"] for k, v in got.items()} == {
        "test_a": "error",
        "test_pass": "pass",
        "test_fail": "fail",
        "test_error": "error",
        "test_marked_xfail": "xfail",
        "test_marked_xfail_passes": "xpass",
        "test_expected_failure": "xfail",
        "test_skipped": "skip",
        "test_module_level_function": "pass",
    }
    assert "this_api_does_not_exist_anywhere" in got["test_a"]["message"] and "import" in got["test_a"]["message"]
    assert "E019" in got["test_error"]["message"]
    assert "AssertionError" in got["test_fail"]["message"]
    assert "FAKE-1" in got["test_marked_xfail"]["message"]
    assert rec["suites"]["sdk-tests"] == {"pass": 2, "fail": 1, "error": 2, "xfail": 2, "xpass": 1, "skip": 1}
    assert rec["files"]["test_fake_kernels.py"]["pass"] == 2
    assert rec["sdk_commit"] == "unknown"  # not a git checkout
    # the printed report: one line per method, the per-file table and the summary line
    assert "FAIL   sdk-tests test_fake_kernels.py::TestFake::test_fail" in proc.stdout
    assert "| test_fake_kernels.py | 8 | 2 | 1 | 1 | 2 | 1 xpass, 1 skip |" in proc.stdout
    assert "sdk-tests: 9 tests: 2 pass, 1 fail, 2 error, 2 xfail, 1 xpass, 1 skip" in proc.stdout
    assert "| sdk-tests | 0.1 | 9 | 2 | 1 | 2 | 2 | 1 | 1 |" in proc.stdout
    # nothing was written into the third-party folder (no __pycache__)
    assert sorted(p.name for p in (fake_sdk / "nki" / "test").iterdir()) == [
        "helper_not_a_test.py",
        "test_fake_broken.py",
        "test_fake_kernels.py",
    ]


def test_timeout_is_an_error(tmp_path):
    d = tmp_path / "nki" / "test"
    d.mkdir(parents=True)
    (d / "test_slow.py").write_text("import time\nclass TestSlow:\n  def test_sleep(self):\n    time.sleep(30)\n")
    results = sdk_tests.run_items(sdk_tests.discover(str(tmp_path)), timeout=3, jobs=1, report=lambda r: None)
    assert [r.outcome for r in results] == ["error"]
    assert "timeout" in results[0].message


def test_filter_and_all_green_exit_status(fake_sdk):
    proc = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "conformance", str(fake_sdk), "-k", "test_pass"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sdk-tests: 1 tests: 1 pass, 0 fail, 0 error" in proc.stdout


@pytest.mark.parametrize(
    "argv, needle",
    [
        ([], "missing PATH"),
        (["/nonexistent/sdk"], "is not a directory"),
        (["{tmp}"], "no test_*.py files"),
        (["{tmp}", "--timeout", "0"], "argument --timeout: must be a finite number > 0"),
        (["{tmp}", "--jobs", "0"], "argument --jobs: must be >= 1"),
        (["--suite", "sdk-examples", "--nki-library", "{tmp}"], "suite sdk-examples needs --sdk PATH"),
        (["--nki-library", "{tmp}", "--library-python", "/nonexistent/python"], "is not an executable file"),
        (["--sdk", "{tmp}", "--suite", "sdk-docstrings"], "nki/api is not a directory"),
        (["{tmp}", "--sdk", "/elsewhere"], "disagree; give one"),
    ],
)
def test_usage_errors(argv, needle, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "conformance", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert needle in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_worker_refuses_wrong_arguments():
    proc = subprocess.run([sys.executable, "-m", "nki_kernels.conformance"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "nki-kernels conformance PATH" in proc.stderr


# ------------------------------------------------------------------ NKI 0.7: sdk-examples
_EXAMPLE_07 = """
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def scale(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


@pytest.mark.parametrize(
    "reference, outcome, message",
    [
        (lambda a: 3.0 * a.astype("float64"), "pass", ""),
        (lambda a: 3.1 * a.astype("float64"), "fail", "elements outside rtol=0.0001"),  # tolerances.compare's words
        ("E001", "fail", "expected the coded error E001, but the kernel ran"),
    ],
)
def test_an_example_is_judged_by_the_one_comparison(tmp_path, reference, outcome, message):
    import numpy as np

    from nki_kernels.sim import install_nki_alias

    (tmp_path / "ex.py").write_text(_EXAMPLE_07)
    ex = sdk07.Example(
        "scale", "ex.py", "scale", lambda: (np.arange(8, dtype=np.float32).reshape(2, 4) + 1,), reference
    )
    with install_nki_alias():
        r = sdk07._run_example(ex, str(tmp_path), 0)
    assert (r.suite, r.id, r.outcome) == ("sdk-examples", "scale", outcome), r
    assert message in r.message


def test_integer_outputs_must_match_exactly():
    import numpy as np

    assert sdk07._compare(np.array([[1, 2]], np.int8), np.array([[1, 2]])) is None
    assert "outside rtol=0.0" in sdk07._compare(np.array([[1, 2]], np.int8), np.array([[1, 3]]))


def test_every_example_names_a_file_and_a_kernel():
    exs = sdk07.examples()
    assert len(exs) == 15 and len({e.label for e in exs}) == 15
    assert sum(isinstance(e.reference, str) for e in exs) == 1  # the documented E001 violation


# ------------------------------------------------------------------ NKI 0.7: sdk-docstrings
_DOC = """
Example:

.. code-block:: python

   import nki.language as nl
   a = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
   nl.device_print("x", a)

Not Python:

.. code-block:: python

   x = nl.ndarray((128, 4), dtype=...,
"""


def test_code_blocks_are_found_in_rst():
    blocks = sdk07.code_blocks(_DOC)
    assert len(blocks) == 2 and blocks[0].strip().startswith("import nki.language as nl")


@pytest.mark.parametrize(
    "code, outcome",
    [
        ("import nki\nassert 1 + 1 == 2", "pass"),
        ("import nki\nassert 1 + 1 == 3", "fail"),
        ("import nki\nx = undefined_name + 1", "skip"),  # not self-contained
        ("import nki\nt = nl.ndarray((4, 4), dtype=..., buffer=nl.sbuf)", "skip"),  # a placeholder
        ("import nki\n@nki.jit\ndef k(a):\n    return a", "skip"),  # a kernel without inputs
        (
            "import nki\n# illegal: 256 partitions\nt = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)\n"
            "nisa.memset(dst=t, value=0.0)",
            "pass",
        ),  # the docs' illegal example: a coded error
        ("import nki\nnisa.no_such_isa_call()", "error"),  # E100: a missing API is an error
    ],
)
def test_a_snippet_outcome(code, outcome):
    from nki_kernels.sim import install_nki_alias

    with install_nki_alias():
        r = sdk07._run_snippet("label", "file.rst", code)
    assert (r.suite, r.outcome) == ("sdk-docstrings", outcome), r


# ------------------------------------------------------------------ NKI 0.7: nki-library
_LIB_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--test-mode", default="hardware")


def pytest_configure(config):
    config.addinivalue_line("markers", "fast: quick tests")
"""

_LIB_TESTS = """
import numpy as np
import pytest
import nki
import nki.language as nl
import nki.isa as nisa
from nki_cpu_simulator import nki as cpu_nki       # the library's simulator hook: the plugin's alias


@nki.jit
def double(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.fast
def test_passes():
    a = np.ones((4, 8), np.float32)
    assert np.allclose(cpu_nki.cpu_simulate(double)[1](a=a), 2 * a)


@pytest.mark.fast
def test_wrong_golden():
    assert np.allclose(double(np.ones((4, 8), np.float32)), 3.0)


class ValidationException(Exception):               # the library's own comparison failure
    pass


@pytest.mark.fast
def test_library_validation():
    raise ValidationException("Validation failed for ['out']")


@pytest.mark.fast
def test_expected_rejection_did_not_happen():
    with pytest.raises(ValueError):
        pass


@pytest.mark.fast
def test_interpreter_error():
    nl.ndarray((256, 1), nl.float32, buffer=nl.sbuf)      # outside a kernel: a coded error


@pytest.mark.fast
@pytest.mark.skip(reason="not on this platform")
def test_skipped():
    pass


@pytest.mark.fast
@pytest.mark.xfail(reason="known")
def test_known_failure():
    assert False


def test_not_fast():
    raise RuntimeError("deselected by -m fast; must not run")
"""


@pytest.fixture
def fake_library(tmp_path):
    lib = tmp_path / "nki-library"
    (lib / "test" / "integration" / "ops").mkdir(parents=True)
    (lib / "test" / "utils").mkdir(parents=True)
    (lib / "src").mkdir()
    (lib / "conftest.py").write_text(_LIB_CONFTEST)
    (lib / "test" / "__init__.py").write_text("")
    (lib / "test" / "utils" / "__init__.py").write_text("")
    (lib / "test" / "utils" / "test_orchestrator.py").write_text("class Orchestrator:\n    pass\n")
    (lib / "test" / "integration" / "ops" / "test_fake_op.py").write_text(_LIB_TESTS)
    (lib / "test" / "integration" / "ops" / "test_other.py").write_text("def test_x():\n    pass\n")
    return lib


def test_nki_library_suite_reports_each_test(fake_library):
    assert nkilib.test_files(str(fake_library)) == [
        "test/integration/ops/test_fake_op.py",
        "test/integration/ops/test_other.py",
    ]
    assert nkilib.test_files(str(fake_library), ("fake",)) == ["test/integration/ops/test_fake_op.py"]
    results = nkilib.run_file(str(fake_library), "test/integration/ops/test_fake_op.py", sys.executable, 300)
    got = {r.id.rsplit("::", 1)[-1]: r for r in results}
    assert {k: r.outcome for k, r in got.items()} == {
        "test_passes": "pass",
        "test_wrong_golden": "fail",
        "test_library_validation": "fail",
        "test_expected_rejection_did_not_happen": "fail",
        "test_interpreter_error": "error",
        "test_skipped": "skip",
        "test_known_failure": "xfail",
    }, {k: (r.outcome, r.message) for k, r in got.items()}
    assert all(r.suite == "nki-library" for r in results)
    assert "not on this platform" in got["test_skipped"].message
    # a file whose tests are all deselected by -m fast reports nothing, not an error
    assert nkilib.run_file(str(fake_library), "test/integration/ops/test_other.py", sys.executable, 300) == []
    assert not list(fake_library.rglob("__pycache__")), "wrote into the third-party checkout"


def test_nki_library_file_past_the_timeout_is_an_error(fake_library):
    slow = fake_library / "test" / "integration" / "ops" / "test_slow.py"
    slow.write_text("import time, pytest\n@pytest.mark.fast\ndef test_sleep():\n    time.sleep(60)\n")
    (r,) = nkilib.run_file(str(fake_library), "test/integration/ops/test_slow.py", sys.executable, 5)
    assert r.outcome == "error" and "timeout after 5 s" in r.message


def test_one_command_runs_every_suite_given(fake_sdk, fake_library, tmp_path):
    out = tmp_path / "all.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nki_kernels.cli",
            "conformance",
            "--sdk",
            str(fake_sdk),
            "--nki-library",
            str(fake_library),
            "--library-python",
            sys.executable,
            "-k",
            "test_pass",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads(out.read_text())
    assert rec["suites"] == {
        "sdk-tests": {"pass": 1, "fail": 0, "error": 0, "xfail": 0, "xpass": 0, "skip": 0},
        "nki-library": {"pass": 1, "fail": 0, "error": 0, "xfail": 0, "xpass": 0, "skip": 0},
    }
    assert "| nki-library | 0.7 | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in proc.stdout
