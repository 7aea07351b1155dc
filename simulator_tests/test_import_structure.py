"""The package's import structure, read from its source with ``ast`` (nothing is imported).

(a) The imports of ``nki_kernels``, function-local ones included, form no cycle.  Imports under
    ``if TYPE_CHECKING:`` never run and are left out, and so is the parent package a module's
    import runs first (a package's ``__init__`` may import its own modules).
(b) No function-local import of a package module: that is how a cycle hides (module A imports B at
    the top, B imports A inside a function).  The exceptions are :data:`ALLOWED`, each with its
    reason, and each reason is checked to hold: (c) below for the hardware job's modules, a
    standard-library-only import closure for the command's entry point, modules that not every
    command loads for a subcommand's own, no interpreter at import for the backend.  An entry
    nothing uses any more fails too, so the list stays short.
(c) The hardware job's own process (``nki_kernels.hw.run``, started by scripts/run_hw.sh with any
    Python >= 3.10) imports the standard library only: every module it imports at module level
    imports nothing else at module level.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "nki_kernels"

STDLIB_ONLY = "imported by the hardware job's own process, which has the standard library only"
ENTRY_POINT = "cli.main sets the BLAS thread default and the signal handling before NumPy and the interpreter load"
CHOSEN = "the interpreter loads only when NKI_BACKEND picks it, never beside the real SDK"
STARTUP = "loads only for its subcommand, not for every nki-kernels command"

# (importing module, imported module or package) -> why the import is inside a function
ALLOWED: dict[tuple[str, str], str] = {
    ("nki_kernels.cli", "nki_kernels.commands"): ENTRY_POINT,
    ("nki_kernels.backend", "nki_kernels.sim"): CHOSEN,
    ("nki_kernels.commands", "nki_kernels.estimate_benchmark"): STARTUP,
    ("nki_kernels.commands", "nki_kernels.sim.speed"): STARTUP,
    ("nki_kernels.conformance", "nki_kernels.conformance.runner"): STARTUP,
    ("nki_kernels.environment", "nki_kernels.sim"): STDLIB_ONLY,
    ("nki_kernels.hw.device", "nki_kernels.tolerances"): STDLIB_ONLY,
    ("nki_kernels.hw.job", "nki_kernels.sim"): STDLIB_ONLY,
    ("nki_kernels.hw.nki07_path", "nki_kernels.sim"): STDLIB_ONLY,
    ("nki_kernels.hw.protocol", "nki_kernels.perf"): STDLIB_ONLY,
    ("nki_kernels.hw.protocol", "nki_kernels.sim"): STDLIB_ONLY,
    ("nki_kernels.perf.cli", "nki_kernels.perf.peers"): STARTUP,
}
HW_JOB = "nki_kernels.hw.run"
PARSER = "nki_kernels.commands"  # what every nki-kernels command imports


@dataclass(frozen=True)
class Import:
    line: int
    targets: tuple[str, ...]  # the package's modules it runs
    external: tuple[str, ...]  # top-level names of the other modules it runs
    local: bool  # inside a function


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _resolve(module: str, node: ast.Import | ast.ImportFrom) -> tuple[list[str], list[str]]:
    """(package modules, other top-level modules) that an import statement runs."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join(here + ([base] if base else []))
        # `from pkg import name`: the module pkg.name when there is one, else pkg itself
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    ours = [n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")]
    return [n for n in ours if n in MODULES], [n.split(".")[0] for n in names if n not in ours]


def _imports(module: str) -> list[Import]:
    found: list[Import] = []

    class Visitor(ast.NodeVisitor):
        depth = 0

        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
            self.depth += 1
            self.generic_visit(node)
            self.depth -= 1

        visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test):  # never runs
                for stmt in node.orelse:
                    self.visit(stmt)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
            ours, other = _resolve(module, node)
            targets = tuple(dict.fromkeys(t for t in ours if t != module))
            found.append(Import(node.lineno, targets, tuple(other), self.depth > 0))

        visit_ImportFrom = visit_Import

    Visitor().visit(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    return found


IMPORTS: dict[str, list[Import]] = {m: _imports(m) for m in MODULES}
GRAPH: dict[str, set[str]] = {m: {t for i in imps if not i.local for t in i.targets} for m, imps in IMPORTS.items()}
ALL_EDGES: dict[str, set[str]] = {m: {t for i in imps for t in i.targets} for m, imps in IMPORTS.items()}


def _parents(module: str) -> Iterator[str]:
    parts = module.split(".")
    for k in range(1, len(parts)):
        yield ".".join(parts[:k])


def _closure(start: str) -> set[str]:
    """Every package module that importing ``start`` runs (its parent packages' ``__init__`` too)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [*GRAPH[m], *(p for p in _parents(m) if p in MODULES)]
    return seen


def _third_party(modules: set[str]) -> dict[str, list[str]]:
    """module -> the modules outside the standard library and the package it imports at module level."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    bad = {m: sorted({e for i in IMPORTS[m] if not i.local for e in i.external} - stdlib) for m in modules}
    return {m: names for m, names in sorted(bad.items()) if names}


def _cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], set[str]]]:
    """(a cycle, its strongly connected component) for each component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in components:  # a shortest way back to the component's first module
        start = min(comp)
        paths = {start: [start]}
        frontier = [start]
        while frontier and start not in {w for v in frontier for w in graph[v]}:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & comp):
                    if w not in paths:
                        paths[w] = [*paths[v], w]
                        nxt.append(w)
            frontier = nxt
        last = next(v for v in frontier if start in graph[v])
        cycles.append(([*paths[last], start], comp))
    return cycles


def test_the_modules_are_found():
    assert len(MODULES) > 100 and {"nki_kernels.cli", "nki_kernels.sim", HW_JOB} <= set(MODULES)
    assert "nki_kernels.perf.report" in GRAPH["nki_kernels.perf.model"]  # the reading works


def test_no_import_cycle_between_the_package_modules():
    def text(cycle: list[str], component: set[str]) -> str:
        steps = [cycle[0], *(f" -> {b}" if b in GRAPH[a] else f" -(in a function)-> {b}" for a, b in pairwise(cycle))]
        rest = sorted(component - set(cycle))
        return "".join(steps) + (f"  (with {', '.join(rest)})" if rest else "")

    cycles = [text(*c) for c in _cycles(ALL_EDGES)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _local_imports() -> Iterator[tuple[str, Import, str]]:
    """(module, statement, package module it runs) of every function-local import of the package."""
    for m, imps in IMPORTS.items():
        for i in imps:
            if i.local:
                for t in i.targets:
                    yield m, i, t


def _allowance(module: str, target: str) -> tuple[str, str] | None:
    return next((k for k in ALLOWED if k[0] == module and (target == k[1] or target.startswith(k[1] + "."))), None)


def test_no_function_local_import_of_a_package_module_but_the_allowed_ones():
    bad = [
        f"{MODULES[m].relative_to(ROOT)}:{i.line} imports {t} inside a function"
        for m, i, t in _local_imports()
        if _allowance(m, t) is None
    ]
    assert not bad, (
        "a function-local import of a package module hides a cycle or a missing split; import it at the "
        "top, or (for a reason that holds) add it to ALLOWED:\n" + "\n".join(bad)
    )
    used = {_allowance(m, t) for m, _, t in _local_imports()}
    assert not set(ALLOWED) - used, f"ALLOWED entries nothing needs any more: {sorted(set(ALLOWED) - used)}"


def test_the_interpreter_keeps_its_imports_at_the_top():
    assert not [(m, i.line) for m, i, _ in _local_imports() if m.startswith("nki_kernels.sim")]


def test_the_hardware_job_imports_the_standard_library_only():
    job = _closure(HW_JOB)
    assert {"nki_kernels.kernels.registry", "nki_kernels.hw.protocol", "nki_kernels.hw.job"} <= job
    assert not _third_party(job), f"the hardware job's modules import beyond the standard library: {_third_party(job)}"


@pytest.mark.parametrize(("module", "target"), sorted(ALLOWED))
def test_each_allowed_local_import_has_its_reason(module: str, target: str):
    why = ALLOWED[(module, target)]
    if why == STDLIB_ONLY:
        assert module in _closure(HW_JOB), f"{module} is not imported by the hardware job's process"
        assert _third_party(_closure(target)), f"{target} needs only the standard library: import it at the top"
    elif why == ENTRY_POINT:
        assert not _third_party(_closure(module)), f"{module} loads {_third_party(_closure(module))} at import"
        assert "nki_kernels.sim" not in _closure(module)
    elif why == STARTUP:
        assert module in _closure(PARSER), f"{module} is not imported by every command"
        assert target not in _closure(PARSER), f"every command loads {target} anyway: import it at the top"
    else:
        assert why == CHOSEN and target not in _closure(module), f"{module} loads {target} at import anyway"
