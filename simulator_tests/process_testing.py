"""Helpers for tests that start real processes and check what they leave behind (Linux /proc).

(A module of its own, not conftest.py, so that `from process_testing import ...` is explicit.)"""

from __future__ import annotations

import os
import pathlib
import time


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
