"""Suite ``sdk-tests`` (NKI 0.1): the aws-neuron-sdk's ``nki/test`` examples, unmodified.

Every ``PATH/nki/test/test_*.py`` (the documentation examples, pytest/unittest style, with golden
values; at commit 81ce03ae they import ``neuronxcc.nki``) is found by parsing, not importing, and
each test method runs in its own process (with a timeout), in the test file's folder, with
``neuronxcc`` resolving to ``nki_kernels.sim`` through ``install_neuronxcc_alias()``.  The file's
own markers are honoured: ``pytest.mark.xfail`` / ``unittest.expectedFailure`` (a failure counts as
``xfail``, a pass as ``xpass``) and ``pytest.mark.skip``/``skipif`` / ``unittest.skip``.

The worker side (``python -m nki_kernels.conformance FILE TEST RESULT_JSON``) is internal.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nki_kernels.conformance.results import BAD, Options, Report, Result
from nki_kernels.sim import install_neuronxcc_alias

SUITE = "sdk-tests"


@dataclass
class Item:
    """One test: ``file`` (absolute), ``cls`` (None for a module-level function), ``name``."""

    file: str
    cls: str | None
    name: str

    @property
    def nodeid(self) -> str:
        base = os.path.basename(self.file)
        return f"{base}::{self.cls}::{self.name}" if self.cls else f"{base}::{self.name}"

    @property
    def test(self) -> str:
        return f"{self.cls}::{self.name}" if self.cls else self.name


# ---------------------------------------------------------------------------------------
# discovery (static: importing a test file runs its module-level code)
# ---------------------------------------------------------------------------------------


def _is_test_class(node: ast.ClassDef) -> bool:
    """unittest.TestCase subclasses (any base spelled ...TestCase) and pytest-style Test* classes."""
    for b in node.bases:
        name = b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
        if name.endswith("TestCase"):
            return True
    return node.name.startswith("Test") and not node.bases


# A module-level ``def test_*`` wrapped by one of these is a kernel object, not a test function
# (pytest collects plain functions only); e.g. ``@nki.jit def test_nl_broadcast(in_tensor)``.
_KERNEL_DECORATORS = ("jit", "trace", "baremetal", "benchmark", "profile", "simulate_kernel")


def _decorator_name(d) -> str:
    d = d.func if isinstance(d, ast.Call) else d
    return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")


def discover_file(path: str) -> list[Item]:
    """Test methods of one file, in source order, found by parsing (not importing) it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    items = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _is_test_class(node):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                    items.append(Item(path, node.name, sub.name))
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name.startswith("test")
            and not any(_decorator_name(d) in _KERNEL_DECORATORS for d in node.decorator_list)
        ):
            items.append(Item(path, None, node.name))
    return items


def test_dir(path: str) -> str:
    """``PATH/nki/test`` of an SDK checkout (PATH may also be that folder itself)."""
    for cand in (os.path.join(path, "nki", "test"), path):
        if os.path.isdir(cand) and any(n.startswith("test_") and n.endswith(".py") for n in os.listdir(cand)):
            return cand
    raise FileNotFoundError(
        f"no test_*.py files in {os.path.join(path, 'nki', 'test')} (nor in {path}). "
        "PATH must be a local checkout of the aws-neuron-sdk repository, whose nki/test folder holds the "
        "NKI examples (commit 81ce03ae or another one whose tests import neuronxcc.nki)"
    )


def discover(path: str) -> list[Item]:
    d = test_dir(path)
    items = []
    for name in sorted(os.listdir(d)):
        if name.startswith("test_") and name.endswith(".py"):
            items.extend(discover_file(os.path.join(d, name)))
    return items


# ---------------------------------------------------------------------------------------
# running one test (parent side)
# ---------------------------------------------------------------------------------------


def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def run_item(item: Item, timeout: float, python: str = sys.executable) -> Result:
    """Run one test method in a fresh interpreter process, in the test file's folder."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # never write __pycache__ into the third-party checkout
    fd, res_path = tempfile.mkstemp(prefix="nki-conformance-", suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, "-m", "nki_kernels.conformance", item.file, item.test, res_path],
            cwd=os.path.dirname(item.file),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        secs = time.perf_counter() - t0
        output = _tail(proc.stdout + proc.stderr)
        try:
            with open(res_path, encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            rec = None
        if rec is None:
            return Result(
                SUITE,
                item.nodeid,
                item.file,
                "error",
                secs,
                f"worker exited with status {proc.returncode} without a result",
                "",
                output,
            )
        return Result(
            SUITE,
            item.nodeid,
            item.file,
            rec["outcome"],
            secs,
            rec.get("message", ""),
            rec.get("traceback", ""),
            output if rec["outcome"] in BAD else "",
            rec.get("marks", []),
        )
    except subprocess.TimeoutExpired as e:
        raw = (e.stdout or b"") + (e.stderr or b"")
        out = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        return Result(
            SUITE,
            item.nodeid,
            item.file,
            "error",
            time.perf_counter() - t0,
            f"timeout: no result after {timeout:g} s",
            "",
            _tail(out),
        )
    finally:
        try:
            os.unlink(res_path)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------
# worker (child side): import the file under the alias, run one test, honour its markers
# ---------------------------------------------------------------------------------------


def _marks(obj) -> list:
    """pytest marks on a function/class (``pytestmark``), without importing pytest ourselves."""
    m = getattr(obj, "pytestmark", [])
    return list(m) if isinstance(m, (list, tuple)) else [m]


def _applies(mark) -> bool:
    """A skipif/xfail mark applies unless its condition argument is false."""
    args = getattr(mark, "args", ())
    if "condition" in getattr(mark, "kwargs", {}):
        args = (mark.kwargs["condition"],)
    if not args:
        return True
    cond = args[0]
    return bool(cond) if not isinstance(cond, str) else True


def _decide(cls_obj, fn) -> tuple[str | None, str, tuple, list]:
    """('skip'|'xfail'|None, reason, xfail raises, mark names) from pytest and unittest markers."""
    names = []
    kind, reason, raises = None, "", ()
    for mk in (_marks(cls_obj) if cls_obj is not None else []) + _marks(fn):
        name = getattr(mk, "name", "")
        names.append(name)
        kw = getattr(mk, "kwargs", {})
        if name in ("skip", "skipif") and _applies(mk) and kind != "skip":
            kind, reason = "skip", kw.get("reason", "") or (mk.args[0] if name == "skip" and mk.args else "")
        elif name == "xfail" and _applies(mk) and kind is None:
            kind, reason = "xfail", kw.get("reason", "")
            r = kw.get("raises")
            raises = tuple(r) if isinstance(r, (tuple, list)) else ((r,) if r else ())
    for obj in (cls_obj, fn):
        if obj is not None and getattr(obj, "__unittest_skip__", False):
            names.append("unittest.skip")
            kind, reason = "skip", getattr(obj, "__unittest_skip_why__", "")
    if getattr(fn, "__unittest_expecting_failure__", False):
        names.append("unittest.expectedFailure")
        if kind is None:
            kind = "xfail"
    return kind, reason, raises, names


def _exc_message(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 600 else text[:600] + " ..."


def _import_file(path: str):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _find_test(mod, test: str):
    """(class or None, function) of ``Class::method`` / ``function`` in the imported module."""
    cls_name, _, name = test.rpartition("::")
    if not cls_name:
        fn = getattr(mod, name)
        params = inspect.signature(fn).parameters
        if params:
            raise TypeError(
                f"{name} takes pytest fixtures ({', '.join(params)}), which the conformance runner does not provide"
            )
        return None, fn
    cls = getattr(mod, cls_name)
    return cls, getattr(cls, name)


class _OneResult(unittest.TestResult):
    """A unittest result that keeps the raw exception of the one test it runs."""

    def __init__(self):
        super().__init__()
        self.exc = None
        self.skip_reason = None

    def addError(self, test, err):
        super().addError(test, err)
        self.exc = self.exc or err[1]

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.exc = self.exc or err[1]

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skip_reason = reason


def worker(path: str, test: str, out_path: str) -> int:
    """Import ``path`` with neuronxcc aliased to the interpreter and run ``test`` in it."""
    rec: dict[str, Any] = {"outcome": "error", "message": "", "traceback": "", "marks": []}
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        install_neuronxcc_alias()
        stage = "import"
        try:
            mod = _import_file(path)
            stage = "collect"
            cls, fn = _find_test(mod, test)
        except BaseException as e:  # noqa: BLE001 - any failure of a third-party file is reported
            rec.update(
                message=f"{stage} of {os.path.basename(path)} failed: {_exc_message(e)}",
                traceback=traceback.format_exc(),
            )
            return _write(out_path, rec)
        kind, reason, raises, names = _decide(cls, fn)
        rec["marks"] = names
        if kind == "skip":
            rec.update(outcome="skip", message=reason)
            return _write(out_path, rec)
        exc = tb = None
        method = test.rpartition("::")[2]
        if cls is not None and isinstance(cls, type) and issubclass(cls, unittest.TestCase):
            cap = _OneResult()
            case = cls(method)
            case.run(cap)
            if cap.skip_reason is not None:
                rec.update(outcome="skip", message=cap.skip_reason)
                return _write(out_path, rec)
            if cap.expectedFailures:
                rec.update(outcome="xfail", message=cap.expectedFailures[0][1].strip().splitlines()[-1])
                return _write(out_path, rec)
            if cap.unexpectedSuccesses:
                rec.update(outcome="xpass")
                return _write(out_path, rec)
            exc = cap.exc
            if exc is not None:
                tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        else:
            try:
                if cls is not None:
                    obj = cls()
                    if hasattr(obj, "setup_method"):
                        obj.setup_method(getattr(obj, method))
                    getattr(obj, method)()
                else:
                    fn()
            except BaseException as e:  # noqa: BLE001
                exc, tb = e, traceback.format_exc()
        if kind == "xfail":
            if exc is None:
                rec.update(outcome="xpass", message=reason)
            elif raises and not isinstance(exc, raises):
                rec.update(outcome="error", message=f"xfail(raises={raises}) but got {_exc_message(exc)}", traceback=tb)
            else:
                rec.update(outcome="xfail", message=f"{reason}: {_exc_message(exc)}" if reason else _exc_message(exc))
            return _write(out_path, rec)
        if exc is None:
            rec["outcome"] = "pass"
        else:
            rec.update(
                outcome="fail" if isinstance(exc, AssertionError) else "error", message=_exc_message(exc), traceback=tb
            )
        return _write(out_path, rec)
    except BaseException as e:  # noqa: BLE001 - the worker itself must always leave a record
        rec.update(message=f"runner error: {_exc_message(e)}", traceback=traceback.format_exc())
        return _write(out_path, rec)


def _write(out_path, rec) -> int:
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(rec, f)
    return 0


def run_items(
    items: list[Item], timeout: float, jobs: int, report: Report, python: str = sys.executable
) -> list[Result]:
    """Run the items, ``jobs`` processes at a time; results in the items' order."""
    results: list[Result | None] = [None] * len(items)

    def one(k: int) -> None:
        r = run_item(items[k], timeout, python)
        results[k] = r
        report(r)

    if jobs > 1:
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            list(ex.map(one, range(len(items))))
    else:
        for k in range(len(items)):
            one(k)
    return [r for r in results if r is not None]


def run_suite(opts: Options, report: Report) -> list[Result]:
    """The suite over ``opts.sdk``."""
    assert opts.sdk is not None
    items = discover(opts.sdk)
    if opts.select:
        items = [i for i in items if opts.select in i.nodeid]
    return run_items(items, opts.timeout, opts.jobs, report)
