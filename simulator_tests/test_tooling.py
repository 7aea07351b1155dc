"""The developer tooling configured in pyproject.toml, run as part of the suite (so CI runs it):
ruff (lint and, where enabled, format), mypy, and the rules no tool checks by itself: every public
function is annotated, and comments cite sources rather than this project's own tracker."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Files not annotated yet; the list only shrinks (empty: every public function is annotated).
NOT_YET_ANNOTATED: set[str] = set()


def _tool(module: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m <module> args`` in the repository, failing (not skipping) when it is missing."""
    probe = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, (
        f"{module} is not installed in {sys.executable}: it is part of the `test` extra "
        f"(pip install -e '.[test]'; python3 dev.py test installs it)"
    )
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _rel(path: Path, root: Path = ROOT) -> str:
    return path.relative_to(root).as_posix()


def _python_files() -> list[Path]:
    roots = [ROOT / "nki_kernels", ROOT / "scripts", ROOT / "simulator_tests", ROOT / "hw_tests"]
    files = [ROOT / "dev.py"] + [p for r in roots for p in sorted(r.rglob("*.py"))]
    return [p for p in files if "__pycache__" not in p.parts]


def test_ruff_lint_is_clean() -> None:
    proc = _tool("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean() -> None:
    proc = _tool("ruff", "format", "--no-cache", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    cache = ROOT / ".mypy_cache"
    proc = _tool("mypy", "--cache-dir", str(cache), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _unannotated(path: Path, root: Path = ROOT) -> list[str]:
    """Public functions and methods (outside ``_private`` classes) with a parameter or the return
    unannotated.  Kernels (``@nki.jit``/``@jit``) are exempt: their arguments are device tensors and
    the NKI front end reads their source."""
    out: list[str] = []

    def is_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for d in fn.decorator_list:
            d = d.func if isinstance(d, ast.Call) else d
            if (d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")) == "jit":
                return True
        return False

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                dunder = node.name.startswith("__") and node.name.endswith("__")
                if (node.name.startswith("_") and not dunder) or is_kernel(node):
                    continue
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
                if prefix and params and params[0].arg in ("self", "cls"):
                    params = params[1:]
                bad = [p.arg for p in params if p.annotation is None]
                if node.returns is None and node.name != "__init__":
                    bad.append("return")
                if bad:
                    out.append(f"{_rel(path, root)}:{node.lineno} {prefix}{node.name}: {', '.join(bad)}")

    visit(ast.parse(path.read_text(encoding="utf-8")).body, "")
    return out


def _library_files() -> list[Path]:
    """The code the annotation rule covers: the package, dev.py and scripts (tests are not API)."""
    return [p for p in _python_files() if _rel(p).startswith(("nki_kernels/", "scripts/", "dev.py"))]


def test_public_functions_are_annotated() -> None:
    missing = [m for p in _library_files() if _rel(p) not in NOT_YET_ANNOTATED for m in _unannotated(p)]
    assert not missing, "public functions without annotations:\n" + "\n".join(missing)
    done = sorted(f for f in NOT_YET_ANNOTATED if (ROOT / f).exists() and not _unannotated(ROOT / f))
    assert not done, f"annotated now: remove {done} from NOT_YET_ANNOTATED"


def test_the_annotation_rule_catches_a_missing_annotation(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import nki\n"
        "def ok(a: int, *b: str, c: float = 1.0, **d: int) -> None: ...\n"
        "def bad(a, b: int): ...\n"
        "def _private(a): ...\n"
        "@nki.jit\n"
        "def kernel(x): ...\n"
        "class C:\n"
        "    def __init__(self, a: int): ...\n"
        "    def meth(self, a) -> int: ...\n"
        "class _Hidden:\n"
        "    def meth(self, a): ...\n"
    )
    assert _unannotated(tmp_path / "m.py", tmp_path) == ["m.py:3 bad: a, return", "m.py:9 C.meth: a"]


# This project's tracker is not public: a comment citing its item numbers tells a reader
# nothing.  Public trackers are cited as owner/repo#N or repo#N, which this pattern leaves alone.
_TRACKER = re.compile(r"(?<![\w/#-])issues? ?\d+\b|\bitem \d+ of issue\b", re.IGNORECASE)


def test_comments_cite_sources_not_this_projects_tracker() -> None:
    found = []
    for p in _python_files():
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if _TRACKER.search(line):
                found.append(f"{_rel(p)}:{n}: {line.strip()}")
    assert not found, "cite the source (doc path, public issue, golden value) instead:\n" + "\n".join(found)


_WORD = "issue"  # spelled apart so that this file does not match itself


@pytest.mark.parametrize(
    "text, flagged",
    [
        (f"# {_WORD} 11, problem 4", True),
        (f"({_WORD.title()} 9)", True),
        ("aws-neuron-sdk#1051", False),
        ("nki-samples#134", False),
    ],
)
def test_the_tracker_pattern(text: str, flagged: bool) -> None:
    assert bool(_TRACKER.search(text)) is flagged


def test_dev_py_installs_the_pinned_tools() -> None:
    """`python3 dev.py test` runs pytest over simulator_tests, which holds this file, in the venv
    dev.py made with the `test` extra: the extra must pin both tools."""
    text = (ROOT / "pyproject.toml").read_text()
    test_extra = re.search(r"^test = \[(.*)\]$", text, re.M)
    assert test_extra, "no `test` extra in pyproject.toml"
    assert re.search(r'"ruff==[0-9.]+"', test_extra.group(1)) and re.search(r'"mypy==[0-9.]+"', test_extra.group(1))
    dev = (ROOT / "dev.py").read_text()
    assert re.search(r'^EXTRAS = \(.*"test"', dev, re.M), "dev.py does not install the test extra"
