"""The README's error-code table and the interpreter's one table of codes (errors.CODES) agree,
and every coded raise in nki_kernels/sim uses the class the table gives its code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nki_kernels.sim import errors
from nki_kernels.sim.core.errors import CODES, NKISyntaxError, SimValueError

ROOT = Path(__file__).resolve().parents[1]
_BUILTINS = (NotImplementedError, IndexError, TypeError, RuntimeError, ValueError)


def _readme_rows():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Error codes") : text.index("### Divergences")]
    return {
        m.group(1): (m.group(2).strip(), m.group(3).strip())
        for m in re.finditer(r"^\| (E\d{3}) \| ([^|]+) \| ([^|]+) \|$", section, re.M)
    }


def test_readme_table_matches_the_code_table():
    rows = _readme_rows()
    assert set(rows) == set(CODES), set(rows) ^ set(CODES)
    for code, (cls, title) in CODES.items():
        base = next(b for b in _BUILTINS if issubclass(cls, b))
        want = f"{base.__name__} (NKISyntaxError)" if cls is NKISyntaxError else base.__name__
        assert rows[code][0] == want, (code, rows[code][0], want)
        assert rows[code][1].lower().startswith(title.lower()), (code, rows[code][1], title)


def test_every_coded_raise_uses_the_class_of_its_code():
    pat = re.compile(r"\b(Sim\w*Error|NKISyntaxError)\(\s*\"(E\d{3})\"")
    seen = set()
    for path in (ROOT / "nki_kernels" / "sim").rglob("*.py"):
        for cls_name, code in pat.findall(path.read_text()):
            cls = getattr(errors, cls_name)
            assert code in CODES, (path.name, code)
            assert cls is CODES[code][0], (path.name, code, cls_name, CODES[code][0].__name__)
            seen.add(code)
    assert len(seen) > 20


def test_a_mismatched_class_is_refused():
    with pytest.raises(RuntimeError, match="error-code table"):
        SimValueError("E007", "op", None, "wrong class for E007")


def _failing_kernel():
    from nki_kernels.sim import nki, nl

    @nki.jit
    def k(a):
        t = nl.load(a)
        return nl.sum(t, axis=0)  # the partition axis: E023

    return k


def test_traceback_of_a_user_error_ends_at_the_users_line(monkeypatch):
    import traceback

    import numpy as np

    from nki_kernels.sim import simulate_kernel

    monkeypatch.delenv("NKI_SIM_FULL_TRACEBACK", raising=False)
    with pytest.raises(ValueError) as ei:
        simulate_kernel(_failing_kernel(), np.ones((4, 4), np.float32))
    frames = traceback.extract_tb(ei.value.__traceback__)
    assert frames[-1].filename == __file__ and "axis=0" in frames[-1].line
    # only the entry point (simulate_kernel -> trace_kernel) remains of the interpreter's frames
    assert sum("nki_kernels/sim/" in f.filename for f in frames) <= 2, frames
    monkeypatch.setenv("NKI_SIM_FULL_TRACEBACK", "1")
    with pytest.raises(ValueError) as ei:
        simulate_kernel(_failing_kernel(), np.ones((4, 4), np.float32))
    assert "nki_kernels/sim/" in traceback.extract_tb(ei.value.__traceback__)[-1].filename


def test_bad_mgrid_step_is_a_syntax_error():
    import numpy as np

    from nki_kernels.sim import nki, nl, simulate_kernel

    @nki.jit
    def k(a):
        nl.mgrid[0:128:2, 0:4]
        return a

    with pytest.raises(NKISyntaxError, match="E014.*unit-step"):
        simulate_kernel(k, np.ones((128, 4), np.float32))
