"""A progress line on stderr for long runs: instructions traced so far and the time elapsed.

    with Progress("profile matmul"):
        ...  # tracing on the interpreter

Nothing is printed for the first ``DELAY`` seconds (short runs stay quiet), then at most one line
per second: on a terminal one line rewritten in place, elsewhere (when asked for) a new line every
``PLAIN_INTERVAL`` seconds so a log does not fill up.  ``NKI_PROGRESS`` decides (checked with the
other variables in :mod:`nki_kernels.environment`): ``auto`` (default) only when stderr is a
terminal, ``1`` always, ``0`` never.

On a terminal the line is cleared before anything else is written to stdout or stderr and drawn
again at the next tick, so it never runs into the program's own output; if the program is in the
middle of a line (``print(..., end="")`` before a long step), the progress line goes below it.

The instruction count comes from the interpreter's run context
(``nki_kernels.sim.core.context.current_run().n_instructions``, the most recently started run in
any thread); where the interpreter does not provide it the line shows the elapsed time alone.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from nki_kernels.environment import progress_wanted
from nki_kernels.sim.core.context import current_run

DELAY = 3.0  # seconds before the first line
INTERVAL = 1.0  # at most one line per INTERVAL on a terminal
PLAIN_INTERVAL = 10.0  # between lines when stderr is not a terminal


def instructions_so_far() -> int | None:
    """Instructions executed by the current interpreter run, or None where that is not available."""
    run = current_run()
    n = getattr(run, "n_instructions", None) if run is not None else None
    return int(n) if isinstance(n, int) else None


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _Guard:
    """Stands in for sys.stdout / sys.stderr while a progress line is on the terminal."""

    def __init__(self, real: IO[str], progress: Progress) -> None:
        self._real = real
        self._progress = progress

    def write(self, text: str) -> int:
        with self._progress._lock:
            self._progress._clear()
            n = self._real.write(text)
            if text:
                self._progress._at_line_start = text.endswith("\n")
            return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class Progress:
    """Context manager printing the progress line from a background thread."""

    def __init__(
        self,
        label: str,
        stream: IO[str] | None = None,
        *,
        enabled: bool | None = None,
        counter: Callable[[], int | None] = instructions_so_far,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.tty = is_tty
        self.enabled = progress_wanted(is_tty) if enabled is None else enabled
        self.counter = counter
        self.clock = clock
        self.start = 0.0
        self.last: float | None = None
        self.printed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._shown = False  # a progress line is on the terminal, without its newline
        self._at_line_start = True  # the program's last write ended a line
        self._saved: tuple[Any, Any] | None = None

    def line(self, now: float) -> str:
        n = self.counter()
        done = f"{n:,} instructions traced, " if n is not None else ""
        return f"[{self.label}] {done}{_clock(now - self.start)} elapsed"

    def tick(self, now: float) -> str | None:
        """The line to print at ``now``, or None (too early, or too soon after the last one)."""
        if now - self.start < DELAY:
            return None
        gap = INTERVAL if self.tty else PLAIN_INTERVAL
        if self.last is not None and now - self.last < gap:
            return None
        self.last = now
        return self.line(now)

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def _emit(self, text: str, final: bool = False) -> None:
        with self._lock:
            if self.tty:
                if self._saved is not None:
                    self._saved[0].flush()
                below = "" if self._at_line_start or self._shown else "\n"
                self._at_line_start = True
                self.stream.write(below + "\r\x1b[K" + text + ("\n" if final else ""))
                self._shown = not final
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
            self.printed = True

    def _run(self) -> None:
        while not self._stop.wait(min(INTERVAL, 0.25)):
            text = self.tick(self.clock())
            if text is not None:
                self._emit(text)

    def __enter__(self) -> Progress:
        self.start = self.clock()
        if self.enabled and self.tty and self.stream is sys.stderr:
            self._saved = (sys.stdout, sys.stderr)
            sys.stdout = _Guard(sys.stdout, self)
            sys.stderr = _Guard(sys.stderr, self)
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="nki-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved
            self._saved = None
        if self.enabled and (self.printed or self.clock() - self.start >= DELAY):
            self._emit(self.line(self.clock()).replace(" elapsed", " in all"), final=True)
