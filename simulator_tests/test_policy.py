"""The never-stricter policy is one table (sim/core/policy.py) and this README lists it exactly."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

from nki_kernels.sim import SimOptions, SimWarning
from nki_kernels.sim.core.context import RunContext, activate, lenient
from nki_kernels.sim.core.errors import CODES, SimError
from nki_kernels.sim.core.policy import LENIENT

README = Path(__file__).resolve().parent.parent / "README.md"
SIM = Path(__file__).resolve().parent.parent / "nki_kernels" / "sim"


def _readme_lenient_table() -> dict[str, str]:
    text = README.read_text()
    section = text[text.index("#### Lenient rules") :]
    section = section[: section.index("\n\n", section.index("| rule | code |"))]
    return dict(re.findall(r"^\| `([^`]+)` \| (E\d{3}) \|", section, re.M))


def test_the_readme_lists_every_lenient_rule_with_its_code() -> None:
    assert _readme_lenient_table() == {rule: r.code for rule, r in LENIENT.items()}


def test_every_lenient_rule_has_a_code_and_a_reason() -> None:
    for rule, r in LENIENT.items():
        assert r.code in CODES, rule
        assert len(r.why) > 20, rule


def test_every_lenient_rule_is_applied_somewhere_and_nothing_else_is() -> None:
    """Every row of the table is named by interpreter code outside policy.py, and every rule id passed to
    lenient() / unproven() / enforce() is a row."""
    named: set[str] = set()
    passed: set[str] = set()
    for path in SIM.rglob("*.py"):
        if path.name == "policy.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in LENIENT:
                named.add(node.value)
            if isinstance(node, ast.Call):
                f = node.func
                fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if fname in ("lenient", "unproven", "enforce", "_lenient") and node.args:
                    first = node.args[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        passed.add(first.value)
    assert not passed - set(LENIENT), f"rules applied but not in policy.LENIENT: {sorted(passed - set(LENIENT))}"
    assert not set(LENIENT) - named, f"rules in policy.LENIENT that nothing applies: {sorted(set(LENIENT) - named)}"


@pytest.mark.parametrize("strict", [False, True])
def test_lenient_warns_once_per_line_by_default_and_raises_its_code_under_strict(strict: bool) -> None:
    ctx = RunContext(SimOptions(strict=strict))
    with activate(ctx), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if strict:
            with pytest.raises(SimError) as e:
                lenient("pm.zero_trip_loop", "what happened", "the fix", op="op")
            assert e.value.code == "E024" and str(e.value).startswith("[E024] op: what happened. the fix.")
            return
        for _ in range(3):
            lenient("pm.zero_trip_loop", "what happened", "the fix", op="op")  # one line: one warning
    msgs = [str(w.message) for w in caught if issubclass(w.category, SimWarning)]
    assert len(msgs) == 1 and msgs[0].startswith("[E024 under strict] pm.zero_trip_loop: what happened; the fix at ")
