"""Helpers for the tests of the command-line entry points: ``nki-kernels`` run in this process with
its output captured, and real processes checked for what they leave behind (Linux /proc).

(A module of its own, not conftest.py, so that `from cli_testing import ...` is explicit.)"""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from nki_kernels import cli


def run_main(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    """``nki-kernels ARGV`` in this process: (exit code, stdout, stderr)."""
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own errors (one line too: usage.OneLineParser)
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_usage_error(code: int, out: str, err: str, message: str) -> None:
    """Exit code 2, ``message`` in one line on stderr, no traceback, nothing traced."""
    assert code == 2, (out, err)
    assert message in err, err
    assert "Traceback" not in err and "tracing" not in err, err
    assert err.count("\n") == 1, f"not one line:\n{err}"


def session_processes(sid: int) -> list[str]:
    """Processes (other than zombies) still in session ``sid`` (a process started with
    ``start_new_session=True`` leads a session whose id is its pid)."""
    left = []
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # /proc/PID/stat after the command name: state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] != "Z":
            left.append(f"{d.name} {cmd[:150]}")
    return left


def wait_for_session_to_end(sid: int, timeout: float = 5.0) -> list[str]:
    """The processes of session ``sid`` still alive after up to ``timeout`` seconds (a stopped
    command's children get SIGKILL 2 s after SIGTERM when they ignore it)."""
    end = time.monotonic() + timeout
    left = session_processes(sid)
    while left and time.monotonic() < end:
        time.sleep(0.1)
        left = session_processes(sid)
    return left


def proc_available() -> bool:
    return os.path.isdir("/proc/self")
