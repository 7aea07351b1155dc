"""How an ``nki-kernels`` command stops: signals, a closed output pipe, its worker processes, and
exceptions raised by the user's own code.

The rules (README, Quickstart), the same for every subcommand:

* **Ctrl-C, SIGTERM, SIGHUP** stop the command within about a second: every child process is sent
  SIGTERM at once (SIGKILL 2 s later if still running), worker pools are stopped and waited for,
  then one line ``nki-kernels <cmd>: interrupted by SIGINT (Ctrl-C)`` on stderr and the shell's
  exit code 128 + N (130, 143, 129).  ``nohup`` (SIGHUP ignored at start)
  is honoured.
* **A closed output pipe** (``nki-kernels profile ... | head -8``) stops the command quietly with
  exit code 141, the status of a process ended by SIGPIPE, workers stopped the same way.  Records
  (``.json``, ``.trace.json``) are written whole before anything is printed, so a closed pipe
  never costs one (:func:`nki_kernels.usage.write_atomically`).
* **Worker processes** (``verify``'s pool) ignore Ctrl-C (their parent stops them: one line, not a
  traceback per worker) and, on Linux, are sent SIGTERM by the kernel when their parent dies, so
  not even a SIGKILL of the parent leaves them running (``prctl(PR_SET_PDEATHSIG)``).
* **The user's own exceptions** (a file given to ``run``, a kernel given to ``profile``) are printed
  as Python prints them, with the user's frames only (the interpreter's errors already end at the
  user's line); the CLI's frames never show.  An exception with no frame of the user's is a bug of
  nki-kernels: one line saying so.  ``NKI_SIM_FULL_TRACEBACK=1`` prints every frame instead.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from typing import Any

SIGPIPE_EXIT = 128 + 13  # what a shell reports for a process ended by SIGPIPE
_STOPPING = (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, "SIGHUP") else (signal.SIGTERM,)
NAMES: dict[int, str] = {
    signal.SIGINT: "SIGINT (Ctrl-C)",
    signal.SIGTERM: "SIGTERM",
    **({signal.SIGHUP: "SIGHUP (the terminal closed)"} if hasattr(signal, "SIGHUP") else {}),
}
# the package's directory: frames below it are nki-kernels', not the user's
_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# the machinery that runs a user's file or imports a user's module
_MACHINERY = ("<frozen runpy>", "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


class Interrupted(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread as Python raises KeyboardInterrupt for SIGINT
    (a BaseException, so that ``except Exception`` in user code does not swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class UserCodeError(Exception):
    """An exception raised by the user's own code (``run``'s file, ``profile``'s kernel)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def children() -> list[int]:
    """The process ids of this process's live children (not zombies)."""
    me = os.getpid()
    if os.path.isdir("/proc"):
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != b"Z":
                found.append(int(entry))
        return found
    try:  # macOS: no /proc
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,stat="], capture_output=True, text=True, timeout=10).stdout
    except (OSError, ValueError):
        return []
    rows = [line.split() for line in out.splitlines()]
    return [int(r[0]) for r in rows if len(r) >= 3 and int(r[1]) == me and not r[2].startswith("Z")]


_stopper: threading.Thread | None = None
_stopper_lock = threading.Lock()
_stopping = threading.Event()
_signalled: dict[int, float] = {}  # child pid -> when it was sent SIGTERM


def stop_children(grace: float = 2.0) -> None:
    """From now until this process exits, stop every child process: SIGTERM at once, SIGKILL if it
    still runs ``grace`` seconds later, and the same for any child started afterwards (a thread pool
    starts its next queued job when one is stopped: conformance then ran one more 30 s test).  The
    first sweep happens here; a daemon thread repeats it every 0.1 s (a signal handler must not wait).
    Threads waiting on a child (conformance's ``subprocess.run`` per test) return at once instead of
    letting the test run to its end."""
    global _stopper
    _stopping.set()
    _sweep(grace)
    with _stopper_lock:
        if _stopper is None or not _stopper.is_alive():
            _stopper = threading.Thread(target=_keep_stopping, args=(grace,), name="nki-stop-children", daemon=True)
            _stopper.start()


def finish_stopping(grace: float = 2.0) -> None:
    """The end of a stopped command: wait up to ``grace`` seconds for the children being stopped,
    SIGKILL what is left, and end the stopping (a test calling ``main`` in its own process goes on)."""
    if not _stopping.is_set():
        return
    end = time.monotonic() + grace
    while children() and time.monotonic() < end:
        time.sleep(0.05)
    for pid in children():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _stopping.clear()
    _signalled.clear()


def _sweep(grace: float) -> None:
    now = time.monotonic()
    for pid in children():  # still our child (not reaped): its pid cannot have been reused
        sent = _signalled.get(pid)
        if sent is None:
            _signalled[pid] = now
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        elif now - sent >= grace:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _keep_stopping(grace: float) -> None:
    while _stopping.is_set():
        _sweep(grace)
        time.sleep(0.1)


def _on_signal(signum: int, _frame: types.FrameType | None) -> None:
    stop_children()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_stop_the_command(prog: str = "nki-kernels") -> Iterator[None]:
    """Inside: SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP raise :class:`Interrupted`, in the
    main thread, after sending SIGTERM to every child process (:func:`stop_children`); the
    ``finally`` blocks and context managers on the way out then stop and reap the workers.  A signal
    ignored when the command started (``nohup``; SIGINT of a background job) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in (signal.SIGINT, *_STOPPING):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, _on_signal)
    relay = _Relay(set(previous))
    unraisable = sys.unraisablehook
    sys.unraisablehook = _redeliver_if_swallowed(unraisable, prog)
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        relay.close()
        finish_stopping()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _redeliver_if_swallowed(previous: Any, prog: str) -> Any:
    """A signal's exception raised while a ``__del__`` runs cannot propagate: Python hands it to
    ``sys.unraisablehook``, prints "Exception ignored ... KeyboardInterrupt" and carries on (the
    interpreter frees tiles in ``__del__`` on every instruction, so `profile` of a long kernel ran on
    after Ctrl-C).  This hook delivers the signal again, quietly, 20 ms later from another thread
    (``_thread.interrupt_main``; raised inside the hook it would be swallowed too).  Code that spends
    nearly all its time in ``__del__`` can swallow every redelivery: 3 s after the first, the command
    stops its children, prints its one line and exits with the signal's code without unwinding.
    Every other unraisable goes to the previous hook."""
    first: list[float] = []

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if not isinstance(exc, (KeyboardInterrupt, Interrupted)):
            previous(unraisable)
            return
        signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
        first[:1] = first[:1] or [time.monotonic()]
        if time.monotonic() - first[0] > 3.0:
            stop_children()
            with contextlib.suppress(OSError):
                os.write(2, f"{prog}: interrupted by {NAMES.get(signum, signum)}\n".encode())
            os._exit(128 + signum)
        threading.Timer(0.02, _thread.interrupt_main, (signum,)).start()

    return hook


class _Relay:
    """Stops the children as soon as a signal arrives, from a thread of its own.

    Python runs a signal's handler in the main thread only, and the kernel may deliver a signal sent
    to the process to another thread: the main thread, waiting on a lock (a future's result), then
    sleeps on until that lock is released.  `nki-kernels conformance --jobs 2` waited 30 s, in 1 of
    5 tries, for the tests its threads were running.  The C-level handler also writes the signal's
    number to the wake-up fd (``signal.set_wakeup_fd``); this thread reads it and stops the
    children at once, which ends the waits, and the main thread then runs the handler."""

    def __init__(self, signums: set[int]) -> None:
        self.signums = signums
        self.previous: int | None = None
        self.read_fd = self.write_fd = -1
        if not signums or not hasattr(signal, "set_wakeup_fd"):
            return
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)
        try:
            self.previous = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):  # not the main thread of the main interpreter
            self._close_fds()
            return
        threading.Thread(target=self._run, name="nki-signal-relay", daemon=True).start()

    def _run(self) -> None:
        fd = self.read_fd
        try:
            while True:
                data = os.read(fd, 64)
                if not data:  # close(): the write end is closed
                    return
                if any(b in self.signums for b in data):
                    stop_children()
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _close_fds(self) -> None:
        for fd in (self.write_fd, self.read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.read_fd = self.write_fd = -1

    def close(self) -> None:
        if self.previous is None:
            return
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(self.previous)
        with contextlib.suppress(OSError):
            os.close(self.write_fd)  # the thread's read returns b"": it ends and closes the read end
        self.write_fd = -1
        self.previous = None


def interruption(exc: BaseException) -> tuple[int, str] | None:
    """(exit code, signal name) of a KeyboardInterrupt / :class:`Interrupted`, else None."""
    if isinstance(exc, KeyboardInterrupt):
        return 128 + signal.SIGINT, NAMES[signal.SIGINT]
    if isinstance(exc, Interrupted):
        return 128 + exc.signum, NAMES.get(exc.signum, f"signal {exc.signum}")
    return None


def stdout_closed() -> int:
    """After a BrokenPipeError on stdout: point stdout at /dev/null (the interpreter's final flush
    must not fail a second time and print "Exception ignored ...") and return exit code 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return SIGPIPE_EXIT


# ------------------------------------------------------------------------------ worker processes
def _die_with_parent(parent: int) -> None:
    """Linux: SIGTERM to this process when its parent dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes  # here: optional (a Python built without libffi has none) and Linux-only

        pr_set_pdeathsig = 1  # <linux/prctl.h>
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the prctl: nobody is left to stop us
        os._exit(1)


def worker_init(parent: int) -> None:
    """Initializer of a worker process (``ProcessPoolExecutor(initializer=worker_init,
    initargs=(os.getpid(),))``): Ctrl-C is the parent's to handle; SIGTERM ends the worker at once
    (a forked worker inherits the parent's Python handlers); it dies with its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in _STOPPING:
        signal.signal(sig, signal.SIG_DFL)
    _die_with_parent(parent)


def stop_workers(pool: Any, grace: float = 2.0) -> None:
    """Stop a ProcessPoolExecutor's workers now (SIGTERM, SIGKILL after ``grace`` seconds), wait
    for them, drop the jobs not started.  ``shutdown(cancel_futures=True)`` alone waits for the
    running jobs to finish: 11-15 s for verify's largest traces."""
    blocked = {signal.SIGINT, *_STOPPING}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked) if hasattr(signal, "pthread_sigmask") else None
    try:
        terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
        procs = list((getattr(pool, "_processes", None) or {}).values())
        if terminate is not None:
            terminate()
        else:
            for p in procs:
                if p.is_alive():
                    p.terminate()
        end = time.monotonic() + grace
        for p in procs:
            p.join(max(0.0, end - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


# ------------------------------------------------------------------------------ the user's exceptions
def _is_ours(filename: str) -> bool:
    return filename.startswith(_PKG_DIR) or filename in _MACHINERY


def _user_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    frames = []
    while tb is not None:
        if not _is_ours(tb.tb_frame.f_code.co_filename):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _trim_chain(exc: BaseException, seen: set[int]) -> None:
    if id(exc) in seen:
        return
    seen.add(id(exc))
    exc.__traceback__ = _user_frames(exc.__traceback__)
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None:
            _trim_chain(linked, seen)


def full_traceback_wanted() -> bool:
    return os.environ.get("NKI_SIM_FULL_TRACEBACK", "").strip().lower() in ("1", "true", "yes", "on")


def print_user_exception(prog: str, exc: BaseException) -> int:
    """Print an exception of the user's code with the user's frames only; exit code 1.  Without a
    single frame of the user's (and not a SyntaxError in the user's file) it is our bug: one line."""
    if full_traceback_wanted():
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        return 1
    _trim_chain(exc, set())
    if exc.__traceback__ is None and not isinstance(exc, SyntaxError):
        return internal_error(prog, exc)
    traceback.print_exception(type(exc), exc, exc.__traceback__)
    return 1


def internal_error(prog: str, exc: BaseException) -> int:
    """One line for an exception that escaped nki-kernels itself (a bug); exit code 1."""
    text = " ".join(str(exc).split())
    print(
        f"{prog}: internal error: {type(exc).__name__}: {text[:300]} (a bug of nki-kernels; "
        "NKI_SIM_FULL_TRACEBACK=1 prints the traceback to report)",
        file=sys.stderr,
    )
    return 1


class ClosedPipeGuard:
    """Stands in for ``sys.stdout`` of a job that must end cleanly when its reader goes away: the
    first write or flush that meets a closed pipe calls ``on_closed`` (the job then stops as for a
    signal), points the stream at /dev/null, and every later write is dropped."""

    def __init__(self, real: Any, on_closed: Any) -> None:
        self._real = real
        self._on_closed = on_closed
        self._lock = threading.Lock()
        self.closed_pipe = False

    def _closed(self) -> None:
        with self._lock:
            if self.closed_pipe:
                return
            self.closed_pipe = True
        stdout_closed()
        self._on_closed()

    def write(self, text: str) -> int:
        if self.closed_pipe:
            return len(text)
        try:
            return int(self._real.write(text))
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self) -> None:
        if self.closed_pipe:
            return
        try:
            self._real.flush()
        except BrokenPipeError:
            self._closed()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)
