"""The progress line of long runs (nki_kernels/progress.py), with a fake clock: no timed assertions."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nki_kernels import progress
from nki_kernels.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _quiet_progress(stream: io.StringIO, counts: list[int], **kw: object) -> Progress:
    it = iter(counts)
    p = Progress("job", stream, enabled=True, counter=lambda: next(it, None), clock=lambda: 0.0, **kw)  # type: ignore[arg-type]
    p.start = 0.0
    return p


def test_nothing_for_the_first_seconds_then_at_most_one_line_per_second_on_a_terminal() -> None:
    p = _quiet_progress(_Tty(), [1000, 2500, 4000])
    assert p.tty
    assert p.tick(0.5) is None and p.tick(progress.DELAY - 0.01) is None
    assert p.tick(progress.DELAY + 0.1) == "[job] 1,000 instructions traced, 0:03 elapsed"
    assert p.tick(progress.DELAY + 0.6) is None  # within a second of the last line
    assert p.tick(progress.DELAY + 1.2) == "[job] 2,500 instructions traced, 0:04 elapsed"
    assert p.tick(3725.0) == "[job] 4,000 instructions traced, 1:02:05 elapsed"


def test_every_ten_seconds_in_a_log() -> None:
    p = _quiet_progress(io.StringIO(), [1, 2, 3])
    assert not p.tty
    assert p.tick(progress.DELAY) is not None
    assert p.tick(progress.DELAY + 5) is None
    assert p.tick(progress.DELAY + progress.PLAIN_INTERVAL) is not None


def test_without_an_instruction_count_the_line_shows_the_time() -> None:
    p = _quiet_progress(io.StringIO(), [])
    assert p.tick(progress.DELAY) == "[job] 0:03 elapsed"


@pytest.mark.parametrize(
    "value, tty, wanted",
    [
        ("", True, True),
        ("", False, False),
        ("auto", False, False),
        ("1", False, True),
        ("on", False, True),
        ("0", True, False),
        ("off", True, False),
    ],
)
def test_nki_progress_decides(monkeypatch: pytest.MonkeyPatch, value: str, tty: bool, wanted: bool) -> None:
    if value:
        monkeypatch.setenv("NKI_PROGRESS", value)
    else:
        monkeypatch.delenv("NKI_PROGRESS", raising=False)
    stream = _Tty() if tty else io.StringIO()
    assert Progress("x", stream).enabled is wanted


def test_a_run_past_the_delay_ends_with_a_summary_line(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    stream = io.StringIO()
    with Progress("job", stream, enabled=True, counter=lambda: 42, clock=lambda: now[0]):
        now[0] = 5.0
    assert stream.getvalue().splitlines()[-1] == "[job] 42 instructions traced, 0:05 in all"
    quiet = io.StringIO()
    with Progress("job", quiet, enabled=True, counter=lambda: 42, clock=lambda: 0.0):
        pass
    assert quiet.getvalue() == ""  # a short run prints nothing


def test_on_a_terminal_the_line_never_runs_into_the_programs_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """The program writes half a line, the progress line goes below it; the program's next write
    first clears the progress line."""
    tty_out, tty_err = _Tty(), _Tty()
    monkeypatch.setattr(sys, "stdout", tty_out)
    monkeypatch.setattr(sys, "stderr", tty_err)
    p = Progress("job", sys.stderr, enabled=True, counter=lambda: 7, clock=lambda: 0.0)
    with p:
        p._stop.set()  # no thread ticks: the test draws the line itself
        print("Running step...", end="")
        p._emit(p.line(4.0))
        print("Passed")
    assert tty_out.getvalue() == "Running step...Passed\n"
    assert tty_err.getvalue().startswith("\n\r\x1b[K[job] 7 instructions traced, 0:04 elapsed\r\x1b[K")
    assert sys.stdout is tty_out and sys.stderr is tty_err  # restored


def test_the_interpreter_run_count_when_the_run_context_provides_it() -> None:
    pytest.importorskip(
        "nki_kernels.sim.core.context",
        reason="the run context's instruction count (shared contract 2) is not in this tree yet",
    )
    import numpy as np

    from nki_kernels.sim import nki, nl, simulate_kernel  # noqa: F401

    @nki.jit
    def copy(a):  # type: ignore[no-untyped-def]
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    simulate_kernel(copy, np.ones((128, 4), np.float32))
    assert progress.instructions_so_far() == 2


def test_a_cli_run_prints_progress_when_asked(tmp_path: Path) -> None:
    """End to end through `nki-kernels run` with NKI_PROGRESS=1 and stderr a pipe (not a terminal):
    a file that runs past the delay gets the summary line."""
    import os

    script = tmp_path / "slow.py"
    script.write_text(
        "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 3.5:\n    time.sleep(0.05)\nprint('ok')\n"
    )
    env = dict(os.environ, NKI_PROGRESS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    lines = proc.stderr.splitlines()
    head = rf"\[run {re.escape(str(script))}\] \d+:\d\d"
    assert lines and re.fullmatch(head + " in all", lines[-1]), proc.stderr
    assert all(re.fullmatch(head + " elapsed", line) for line in lines[:-1]), proc.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", str(script)],
        capture_output=True,
        text=True,
        env=dict(os.environ, NKI_PROGRESS="0"),
        timeout=120,
    )
    assert quiet.stderr == ""
