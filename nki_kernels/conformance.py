"""``nki-kernels conformance PATH``: run the SDK's own NKI 0.1 examples through the interpreter.

PATH is a local checkout of the aws-neuron-sdk repository.  Every ``PATH/nki/test/test_*.py``
(the documentation examples, pytest/unittest style, with golden values; at commit 81ce03ae
they still import ``neuronxcc.nki``) is run **unmodified**: each test method in its own
subprocess (with a timeout), with ``neuronxcc`` resolving to ``nki_kernels.sim`` through
``install_neuronxcc_alias()``.  The file's own markers are honoured: ``pytest.mark.xfail`` /
``unittest.expectedFailure`` (a failure counts as ``xfail``, a pass as ``xpass``) and
``pytest.mark.skip``/``skipif`` / ``unittest.skip`` (``skip``).

Outcomes per method: ``pass``; ``fail`` (an ``AssertionError``: a golden value differs);
``error`` (any other exception, e.g. an interpreter error or a missing API; also import
errors of the file and timeouts); ``xfail``; ``xpass``; ``skip``.  The exit status is 0 when
no method failed or errored.

The third-party files are read where they are; nothing is copied into this project.  This
module is also the worker the runner starts (``python -m nki_kernels.conformance FILE TEST
RESULT_JSON``); that form is internal.
"""
from __future__ import annotations

import argparse
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
from dataclasses import asdict, dataclass, field

OUTCOMES = ("pass", "fail", "error", "xfail", "xpass", "skip")
_BAD = ("fail", "error")


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


@dataclass
class Result:
    nodeid: str
    file: str
    outcome: str
    seconds: float
    message: str = ""
    traceback: str = ""
    output: str = ""
    marks: list = field(default_factory=list)


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
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test") and \
                not any(_decorator_name(d) in _KERNEL_DECORATORS for d in node.decorator_list):
            items.append(Item(path, None, node.name))
    return items


def test_dir(path: str) -> str:
    """``PATH/nki/test`` of an SDK checkout (PATH may also be that folder itself)."""
    for cand in (os.path.join(path, "nki", "test"), path):
        if os.path.isdir(cand) and any(n.startswith("test_") and n.endswith(".py") for n in os.listdir(cand)):
            return cand
    raise FileNotFoundError(
        f"nki-kernels conformance: no test_*.py files in {os.path.join(path, 'nki', 'test')} (nor in {path}). "
        "PATH must be a local checkout of the aws-neuron-sdk repository, whose nki/test folder holds the "
        "NKI examples (commit 81ce03ae or another one whose tests import neuronxcc.nki)")


def discover(path: str) -> list[Item]:
    d = test_dir(path)
    items = []
    for name in sorted(os.listdir(d)):
        if name.startswith("test_") and name.endswith(".py"):
            items.extend(discover_file(os.path.join(d, name)))
    return items


def sdk_commit(path: str) -> str:
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


# ---------------------------------------------------------------------------------------
# running one test (parent side)
# ---------------------------------------------------------------------------------------

def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def run_item(item: Item, timeout: float, python: str = sys.executable) -> Result:
    """Run one test method in a fresh interpreter process, in the test file's folder."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"        # never write __pycache__ into the third-party checkout
    fd, res_path = tempfile.mkstemp(prefix="nki-conformance-", suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([python, "-m", "nki_kernels.conformance", item.file, item.test, res_path],
                              cwd=os.path.dirname(item.file), env=env, capture_output=True, text=True,
                              timeout=timeout)
        secs = time.perf_counter() - t0
        output = _tail(proc.stdout + proc.stderr)
        try:
            with open(res_path, encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            rec = None
        if rec is None:
            return Result(item.nodeid, item.file, "error", secs,
                          f"worker exited with status {proc.returncode} without a result", "", output)
        return Result(item.nodeid, item.file, rec["outcome"], secs, rec.get("message", ""),
                      rec.get("traceback", ""), output if rec["outcome"] in _BAD else "", rec.get("marks", []))
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        return Result(item.nodeid, item.file, "error", time.perf_counter() - t0,
                      f"timeout: no result after {timeout:g} s", "", _tail(out))
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
            raise TypeError(f"{name} takes pytest fixtures ({', '.join(params)}), which the conformance runner "
                            "does not provide")
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
    rec = {"outcome": "error", "message": "", "traceback": "", "marks": []}
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        # imported here, in the child only: the parent process never loads the interpreter
        from nki_kernels.sim import install_neuronxcc_alias
        install_neuronxcc_alias()
        stage = "import"
        try:
            mod = _import_file(path)
            stage = "collect"
            cls, fn = _find_test(mod, test)
        except BaseException as e:  # noqa: BLE001 - any failure of a third-party file is reported
            rec.update(message=f"{stage} of {os.path.basename(path)} failed: {_exc_message(e)}",
                       traceback=traceback.format_exc())
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
                rec.update(outcome="error", message=f"xfail(raises={raises}) but got {_exc_message(exc)}",
                           traceback=tb)
            else:
                rec.update(outcome="xfail", message=f"{reason}: {_exc_message(exc)}" if reason
                           else _exc_message(exc))
            return _write(out_path, rec)
        if exc is None:
            rec["outcome"] = "pass"
        else:
            rec.update(outcome="fail" if isinstance(exc, AssertionError) else "error",
                       message=_exc_message(exc), traceback=tb)
        return _write(out_path, rec)
    except BaseException as e:  # noqa: BLE001 - the worker itself must always leave a record
        rec.update(message=f"runner error: {_exc_message(e)}", traceback=traceback.format_exc())
        return _write(out_path, rec)


def _write(out_path, rec) -> int:
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(rec, f)
    return 0


# ---------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------

def summarize(results: list[Result]) -> dict:
    counts = {o: 0 for o in OUTCOMES}
    for r in results:
        counts[r.outcome] += 1
    return counts


def per_file(results: list[Result]) -> list[tuple[str, dict]]:
    files: dict = {}
    for r in results:
        files.setdefault(os.path.basename(r.file), []).append(r)
    return [(f, summarize(rs)) for f, rs in files.items()]


def summary_line(results: list[Result], commit: str, seconds: float) -> str:
    c = summarize(results)
    parts = ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o] or o in ("pass", "fail", "error"))
    return f"{len(results)} test methods: {parts} (aws-neuron-sdk {commit[:8]}, {seconds:.0f} s)"


def format_table(results: list[Result]) -> str:
    """Per-file counts as a Markdown table (the README's Conformance section)."""
    rows = ["| file | methods | pass | fail | error | xfail | other |", "|---|---|---|---|---|---|---|"]
    for f, c in per_file(results):
        n = sum(c.values())
        other = ", ".join(f"{c[o]} {o}" for o in ("xpass", "skip") if c[o]) or ""
        rows.append(f"| {f} | {n} | {c['pass']} | {c['fail']} | {c['error']} | {c['xfail']} | {other} |")
    return "\n".join(rows)


def run(path: str, *, timeout: float = 300, jobs: int = 1, select: str | None = None, out=print,
        python: str = sys.executable) -> tuple[list[Result], str, float]:
    items = discover(path)
    if select:
        items = [i for i in items if select in i.nodeid]
    commit = sdk_commit(path)
    t0 = time.perf_counter()
    results: list[Result] = [None] * len(items)   # type: ignore[list-item]
    width = max((len(i.nodeid) for i in items), default=0)

    def one(k):
        r = run_item(items[k], timeout, python)
        results[k] = r
        msg = f"  {r.message.splitlines()[0][:200]}" if r.message and r.outcome != "pass" else ""
        out(f"{r.outcome.upper():6} {r.nodeid.ljust(width)} {r.seconds:6.1f} s{msg}")
        return r

    if jobs > 1:
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            list(ex.map(one, range(len(items))))
    else:
        for k in range(len(items)):
            one(k)
    return results, commit, time.perf_counter() - t0


def cmd_conformance(args) -> int:
    if not args.path:
        print("nki-kernels conformance: missing PATH, a local checkout of the aws-neuron-sdk repository "
              "(its nki/test folder holds the NKI examples that are run), e.g.\n"
              "  nki-kernels conformance ~/src/aws-neuron-sdk", file=sys.stderr)
        return 2
    if not os.path.isdir(args.path):
        print(f"nki-kernels conformance: PATH {args.path!r} is not a directory; expected a local checkout of the "
              "aws-neuron-sdk repository", file=sys.stderr)
        return 2
    if args.timeout <= 0 or args.jobs < 1:
        print(f"nki-kernels conformance: --timeout must be > 0 (got {args.timeout}) and --jobs >= 1 "
              f"(got {args.jobs})", file=sys.stderr)
        return 2
    try:
        items_dir = test_dir(args.path)
    except FileNotFoundError as e:
        print(str(e), file=sys.stderr)
        return 2
    print(f"nki-kernels conformance: {items_dir} through nki_kernels.sim (neuronxcc alias), one process per "
          f"test method, timeout {args.timeout:g} s", flush=True)
    results, commit, secs = run(args.path, timeout=args.timeout, jobs=args.jobs, select=args.k,
                                out=lambda s: print(s, flush=True))
    if not results:
        print(f"nki-kernels conformance: no test methods matched{' -k ' + args.k if args.k else ''}",
              file=sys.stderr)
        return 2
    print()
    print(format_table(results))
    print()
    line = summary_line(results, commit, secs)
    print(line)
    if args.json:
        rec = {"sdk_path": os.path.abspath(args.path), "sdk_commit": commit, "seconds": round(secs, 1),
               "timeout": args.timeout, "summary": summarize(results),
               "files": {f: c for f, c in per_file(results)}, "results": [asdict(r) for r in results]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rec, f, indent=1)
        print(f"wrote {args.json}")
    return 1 if any(r.outcome in _BAD for r in results) else 0


def add_subcommand(sub) -> None:
    c = sub.add_parser("conformance", help="run the SDK's nki/test examples through the interpreter, per method",
                       description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("path", nargs="?", metavar="PATH", help="local checkout of the aws-neuron-sdk repository")
    c.add_argument("--json", metavar="FILE", help="also write every result (with tracebacks) to FILE")
    c.add_argument("--timeout", type=float, default=300, help="seconds per test method (default 300)")
    c.add_argument("--jobs", type=int, default=1, help="test processes at a time (default 1)")
    c.add_argument("-k", metavar="SUBSTRING", help="only tests whose id (file::Class::method) contains SUBSTRING")
    c.set_defaults(func=cmd_conformance)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("internal worker of `nki-kernels conformance`: python -m nki_kernels.conformance FILE TEST "
                 "RESULT_JSON (run `nki-kernels conformance PATH` instead)")
    sys.exit(worker(*sys.argv[1:]))
