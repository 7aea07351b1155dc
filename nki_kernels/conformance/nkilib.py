"""Suite ``nki-library`` (NKI 0.7): aws-neuron/nki-library's own tests on the interpreter.

Each ``test/integration/**/test_*.py`` of the checkout runs as ``pytest -m fast
--test-mode=simulation`` in the library's folder, in ``--library-python`` (a Python with torch,
numpy, ml_dtypes and pytest: the library's references use torch), with the plugin
:mod:`nki_kernels.conformance.nkilib_plugin`, which points the library's simulator hook
(``nki_cpu_simulator.nki``) at the interpreter's NKI 0.7 front end and writes one result per test.
The tests' own skips (``-m fast`` deselection is not counted) and tolerances apply; a failed
expectation (an AssertionError, pytest's ``Failed`` such as "DID NOT RAISE", the library's
ValidationException) is ``fail``, any other
exception (the library wraps interpreter errors in its InferenceException) is ``error``.  A file that
runs past ``--timeout`` adds one ``error`` result for the tests that did not report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from nki_kernels.conformance.results import Options, Report, Result

SUITE = "nki-library"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_files(lib: str, only: tuple[str, ...] = ()) -> list[str]:
    """The library's integration test files (relative paths), those containing an ``only`` substring."""
    base = os.path.join(lib, "test", "integration")
    files = sorted(
        os.path.relpath(os.path.join(d, f), lib)
        for d, _, names in os.walk(base)
        for f in names
        if f.startswith("test_") and f.endswith(".py")
    )
    return [f for f in files if not only or any(o in f for o in only)]


def _read(path: str) -> dict[str, dict]:
    records: dict[str, dict] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    records[rec["id"]] = rec  # a later line (a teardown error) overrides
    except OSError:
        pass
    return records


def run_file(lib: str, rel: str, python: str, timeout: float) -> list[Result]:
    """One test file through pytest in ``python``; its results (one per test)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(lib, "src"), lib]),
        OPENBLAS_NUM_THREADS="1",
        NKI_BACKEND="sim",
        PYTHONDONTWRITEBYTECODE="1",
    )
    fd, res_path = tempfile.mkstemp(prefix="nki-conformance-nkilib-", suffix=".jsonl")
    os.close(fd)
    env["NKI_CONFORMANCE_RESULTS"] = res_path
    # the library's harness dumps every test's inputs and outputs under --output-directory (default: its checkout's
    # neuron_test_output/, 78 GB for a whole-library run here): a temporary folder, deleted after the file
    artifacts = tempfile.mkdtemp(prefix="nki-conformance-nkilib-artifacts-")
    env["NKI_CONFORMANCE_ARTIFACTS"] = artifacts  # the plugin points --output-directory there
    cmd = [
        python,
        "-m",
        "pytest",
        "-p",
        "nki_kernels.conformance.nkilib_plugin",
        rel,
        "-q",
        "-m",
        "fast",
        "--test-mode=simulation",
        "-p",
        "no:cacheprovider",
        "--tb=short",
    ]
    t0 = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.run(cmd, cwd=lib, env=env, capture_output=True, text=True, timeout=timeout)
        output = (proc.stdout + proc.stderr)[-4000:]
        code = proc.returncode
    except subprocess.TimeoutExpired:
        timed_out, output, code = True, "", -1
    try:
        records = _read(res_path)
    finally:
        os.unlink(res_path)
        shutil.rmtree(artifacts, ignore_errors=True)
    path = os.path.join(lib, rel)
    results = [
        Result(
            SUITE, r["id"], path, r["outcome"], float(r["seconds"]), r.get("message", ""), cpu=float(r.get("cpu", 0))
        )
        for r in records.values()
    ]
    secs = time.perf_counter() - t0
    if timed_out:
        results.append(Result(SUITE, f"{rel} (rest of the file)", path, "error", secs, f"timeout after {timeout:g} s"))
    elif not results and code not in (0, 5):  # 5: nothing collected (every test deselected by -m fast)
        results.append(Result(SUITE, rel, path, "error", secs, f"pytest exited with status {code}", "", output))
    return results


def format_file_table(lib: str, only: tuple[str, ...], results: list[Result]) -> str:
    """Per test file, every file of the library (those with no ``-m fast`` test too), as Markdown;
    CPU is the tests' own process time (the file's imports and collection not included)."""
    rows = [
        "| test file | tests | pass | fail | error | skip | other | CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by_file: dict[str, list[Result]] = {}
    for r in results:
        by_file.setdefault(os.path.relpath(r.file, lib), []).append(r)
    total = 0.0
    for rel in test_files(lib, only):
        rs = by_file.get(rel, [])
        c = {o: sum(r.outcome == o for r in rs) for o in ("pass", "fail", "error", "skip", "xfail", "xpass")}
        other = ", ".join(f"{c[o]} {o}" for o in ("xfail", "xpass") if c[o]) or ("no -m fast test" if not rs else "")
        cpu = sum(r.cpu for r in rs)
        total += cpu
        name = rel.removeprefix("test/integration/nkilib/")
        rows.append(
            f"| {name} | {len(rs)} | {c['pass']} | {c['fail']} | {c['error']} | {c['skip']} | {other} | {cpu:.0f} |"
        )
    rows.append(f"| all {len(test_files(lib, only))} files | {len(results)} | | | | | | {total:.0f} |")
    return "\n".join(rows)


def run_suite(opts: Options, report: Report) -> list[Result]:
    """The suite over ``opts.nki_library``, ``opts.jobs`` test files at a time; results in file order."""
    assert opts.nki_library is not None
    lib = opts.nki_library
    files = test_files(lib, opts.only)
    per_file: list[list[Result]] = [[] for _ in files]

    def one(k: int) -> None:
        for r in run_file(lib, files[k], opts.library_python, opts.timeout):
            if opts.select and opts.select not in r.id:
                continue
            report(r)
            per_file[k].append(r)

    if opts.jobs > 1:
        with ThreadPoolExecutor(max_workers=opts.jobs) as ex:
            list(ex.map(one, range(len(files))))
    else:
        for k in range(len(files)):
            one(k)
    return [r for rs in per_file for r in rs]
