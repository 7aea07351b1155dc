"""The NKI 0.1 rule corpus: one bad kernel and its fixed twin per documented rule.

Each file of ``simulator_tests/data/nki01_rules/`` (format: its README.md) names a rule of
``docs/nki-0.1-rules.md``, the source that states it, the error code the bad form must raise and
the line that must be blamed (``# <- blame``).  Three tests per case:

* ``bad``: by default the bad form raises the coded error at the blamed line -- or, for a ``STRICT``
  rule, runs with a ``SimWarning`` naming that line;
* ``bad_strict``: under ``SimOptions(strict=True)`` every bad form raises the coded error there;
* ``good``: the fixed twin runs without a ``SimWarning`` (default and strict options) and, where the
  case has a ``reference``, agrees with it.

``XFAIL`` is the one list of tests the current interpreter does not pass yet; they are marked
``xfail(strict=True)``, so a case that starts passing fails until it is removed from the list.
``python simulator_tests/test_nki01_rules.py`` prints the per-case table and the totals without
consulting ``XFAIL`` (the baseline recorded in docs/nki-0.1-rules.md).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from nki_kernels.sim import SimError, SimOptions, SimWarning, install_neuronxcc_alias, simulate_kernel
from nki_kernels.sim.core.policy import LENIENT

DATA = Path(__file__).parent / "data" / "nki01_rules"
OPTIONS = SimOptions()
STRICT_OPTIONS = SimOptions(strict=True)

# Tests the current interpreter fails: "<case>::<bad|bad_strict|good>".  Empty: every case passes.  A new
# case the interpreter cannot pass yet goes here (xfail(strict=True): it fails once it starts passing).
XFAIL: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Case:
    """One corpus file, loaded under the ``neuronxcc`` alias."""

    name: str
    path: Path
    module: ModuleType
    rule: str
    code: str | None
    strict: bool
    blame: int | None

    def args(self) -> tuple:
        return tuple(self.module.inputs())


def _blame_line(path: Path) -> int | None:
    hits = [i + 1 for i, line in enumerate(path.read_text().splitlines()) if line.rstrip().endswith("# <- blame")]
    if len(hits) > 1:
        raise ValueError(f"{path.name}: more than one '# <- blame' line")
    return hits[0] if hits else None


def load_case(path: Path) -> Case:
    """Import one corpus file (its `neuronxcc` imports resolve to the interpreter)."""
    with install_neuronxcc_alias(precision=None):
        spec = importlib.util.spec_from_file_location(f"nki01_rules_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    code = mod.CODE
    blame = _blame_line(path)
    if (getattr(mod, "bad", None) is None) != (code is None) or (code is not None and blame is None):
        raise ValueError(f"{path.name}: a case has `bad`, `CODE` and a '# <- blame' line, or none of them")
    return Case(path.stem, path, mod, mod.RULE, code, bool(getattr(mod, "STRICT", False)), blame)


def load_cases() -> list[Case]:
    return [load_case(p) for p in sorted(DATA.glob("*.py")) if not p.name.startswith("_")]


CASES = load_cases()


def _run(case: Case, kernel: Any, options: SimOptions) -> tuple[Any, list[warnings.WarningMessage]]:
    """Run ``kernel`` on the case's inputs; return (outputs, SimWarnings raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if getattr(case.module, "CALL", "simulate") == "direct":
            out = kernel(*case.args())
        else:
            grid = getattr(case.module, "GRID", None)
            k = kernel[grid] if grid else kernel
            out = simulate_kernel(k, *case.args(), options=options)
    return out, [w for w in caught if issubclass(w.category, SimWarning)]


def _blamed(e: SimError, case: Case) -> bool:
    return os.path.abspath(e.file) == str(case.path) and e.line == case.blame


def check_bad(case: Case, options: SimOptions) -> str | None:
    """None if the bad form behaves as the case requires under ``options``, else what went wrong."""
    strict_rule_default = case.strict and not options.strict
    try:
        _, warned = _run(case, case.module.bad, options)
    except SimError as e:
        if strict_rule_default:
            return f"a strict-only rule raised by default: {e}"
        if e.code != case.code:
            return f"raised {e.code}, expected {case.code}: {e}"
        if not _blamed(e, case):
            return f"blamed {os.path.basename(e.file)}:{e.line}, expected line {case.blame}: {e}"
        return None
    except Exception as e:  # noqa: BLE001 -- an uncoded exception is a finding, reported as such
        return f"uncoded {type(e).__name__}: {e}"
    if strict_rule_default:
        # the never-stricter policy's one warning form (sim/core/policy.py): the code and the lenient rule
        tag = f"[{case.code} under strict] {case.rule}: "
        at_line = [
            w
            for w in warned
            if os.path.abspath(w.filename) == str(case.path) and w.lineno == case.blame and tag in str(w.message)
        ]
        return (
            None if at_line else f"no `{tag}` SimWarning at line {case.blame} (got {[str(w.message) for w in warned]})"
        )
    return "ran without an error"


def check_good(case: Case) -> str | None:
    """None if the good twin runs cleanly (default and strict) and matches its reference."""
    allowed = getattr(case.module, "GOOD_WARNS", None)
    for options in (OPTIONS, STRICT_OPTIONS):
        try:
            out, warned = _run(case, case.module.good, options)
        except Exception as e:  # noqa: BLE001
            return f"{'strict' if options.strict else 'default'}: {type(e).__name__}: {e}"
        unexpected = [str(w.message) for w in warned if not (allowed and allowed in str(w.message))]
        if unexpected:
            return f"{'strict' if options.strict else 'default'}: SimWarning {unexpected[0]}"
        ref = getattr(case.module, "reference", None)
        if ref is not None:
            want = ref(*case.args())
            got = out if isinstance(out, tuple) else (out,)
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want, strict=True):
                if np.shape(g) != np.shape(w) or not np.allclose(np.asarray(g, np.float64), w, rtol=2e-2, atol=1e-3):
                    return f"result differs from the reference (shape {np.shape(g)} vs {np.shape(w)})"
    return None


def _params(kind: str) -> list:
    out = []
    for c in CASES:
        if kind != "good" and c.code is None:
            continue
        test_id = f"{c.name}::{kind}"
        marks = (
            [pytest.mark.xfail(strict=True, reason=f"{c.rule}: not implemented yet (docs/nki-0.1-rules.md)")]
            if test_id in XFAIL
            else []
        )
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


def test_strict_only_cases_are_the_lenient_rules_of_the_policy() -> None:
    """A case is strict-only exactly when its rule is a lenient rule of sim/core/policy.py, with that code."""
    wrong = [
        f"{c.name}: RULE {c.rule!r} CODE {c.code} STRICT {c.strict}"
        for c in CASES
        if c.code is not None and (c.strict != (c.rule in LENIENT) or (c.strict and LENIENT[c.rule].code != c.code))
    ]
    assert not wrong, wrong


def test_xfail_list_names_existing_tests() -> None:
    known = {f"{c.name}::{k}" for c in CASES for k in ("bad", "bad_strict", "good") if k == "good" or c.code}
    assert not XFAIL - known, sorted(XFAIL - known)


@pytest.mark.parametrize("case", _params("bad"))
def test_bad(case: Case) -> None:
    problem = check_bad(case, OPTIONS)
    assert problem is None, f"{case.name} ({case.rule}, {case.code}): {problem}"


@pytest.mark.parametrize("case", _params("bad_strict"))
def test_bad_strict(case: Case) -> None:
    problem = check_bad(case, STRICT_OPTIONS)
    assert problem is None, f"{case.name} ({case.rule}, {case.code}): {problem}"


@pytest.mark.parametrize("case", _params("good"))
def test_good(case: Case) -> None:
    problem = check_good(case)
    assert problem is None, f"{case.name} ({case.rule}): {problem}"


def baseline() -> dict[str, dict[str, str | None]]:
    """Every case's three results without consulting ``XFAIL``: {case: {test: problem or None}}."""
    table: dict[str, dict[str, str | None]] = {}
    for c in CASES:
        row: dict[str, str | None] = {}
        if c.code is not None:
            row["bad"] = check_bad(c, OPTIONS)
            row["bad_strict"] = check_bad(c, STRICT_OPTIONS)
        row["good"] = check_good(c)
        table[c.name] = row
    return table


def main() -> None:
    table = baseline()
    verbose = "-v" in sys.argv
    failing = []
    for c in CASES:
        row = table[c.name]
        marks = " ".join(f"{k}={'ok' if v is None else 'FAIL'}" for k, v in row.items())
        print(f"{c.name:70s} {c.code or '-':5s} {'strict' if c.strict else '':6s} {marks}")
        for k, v in row.items():
            if v is not None:
                failing.append(f"{c.name}::{k}")
                if verbose:
                    print(f"    {k}: {v[:300]}")
    rules = [c for c in CASES if c.code is not None]
    documented = [c for c in rules if not c.strict]
    strict_only = [c for c in rules if c.strict]
    print()
    print(
        f"cases: {len(CASES)} ({len(rules)} with a bad form: {len(documented)} errors by default, "
        f"{len(strict_only)} strict-only; {len(CASES) - len(rules)} accept-only)"
    )
    print(
        f"default-error bad forms rejected by default (code + line): "
        f"{sum(table[c.name]['bad'] is None for c in documented)}/{len(documented)}"
    )
    print(
        f"strict-only bad forms warned by default (at the line): "
        f"{sum(table[c.name]['bad'] is None for c in strict_only)}/{len(strict_only)}"
    )
    print(
        f"all bad forms rejected under strict (code + line): "
        f"{sum(table[c.name]['bad_strict'] is None for c in rules)}/{len(rules)}"
    )
    print(
        f"good twins run clean (default and strict, reference): "
        f"{sum(table[c.name]['good'] is None for c in CASES)}/{len(CASES)}"
    )
    if "--xfail" in sys.argv:
        print("\nXFAIL = frozenset({")
        for t in failing:
            print(f'    "{t}",')
        print("})")


if __name__ == "__main__":
    main()
