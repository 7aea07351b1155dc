"""Command-line argument checking shared by every ``nki-kernels`` subcommand.

The rule (README, Quickstart): every bad argument is a usage error, one line on stderr naming what
was wrong and what is allowed, exit code 2, before any work.  This module holds the pieces that
make that true everywhere: the error type, an argparse parser whose own errors are one line too,
argparse value types with ranges, and the checks that an output path can be written, done before
the work whose result would be lost.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Callable
from typing import NoReturn


class UsageError(Exception):
    """A bad command-line argument: printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (argparse prints its usage block first)."""

    def error(self, message: str) -> NoReturn:
        if "expected one argument" in message:
            message += " (a value starting with '-' is written with '=', e.g. --shape=-1,2)"
        self.exit(2, f"{self.prog}: {message}; see {self.prog} --help\n")


def plain_text(doc: str) -> str:
    """A docstring as --help text: reST markup (````x````, ``:class:`X```) stripped to the words, which
    leaked into `nki-kernels --help` as written."""
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    return doc.replace("``", "")


def attach_dash_values(argv: list[str]) -> list[str]:
    """``--shape -1,2,3`` -> ``--shape=-1,2,3``: argparse would take ``-1,2,3`` for an option and
    report a missing value, hiding what is wrong with the value itself."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" not in a and i + 1 < len(argv) and re.match(r"-\.?\d", argv[i + 1]):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
        else:
            out.append(a)
            i += 1
    return out


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def int_in_range(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``low..high`` (a huge value is a typo, never a plan:
    ``verify --jobs 99999999999`` silently ran 13 workers, ``sim-bench --iters 999999999999`` until
    killed)."""
    at_least = int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:,}, got {value:,}")
        return value

    parse.__name__ = f"integer in {low}..{high}"
    return parse


def add_max_instructions(group: argparse._ActionsContainer) -> None:
    """``--max-instructions N`` (run, profile): SimOptions.max_instructions, the runaway-kernel cap (E031)."""
    group.add_argument(
        "--max-instructions",
        metavar="N",
        type=int_in_range(1, 10**12),
        default=None,
        help="stop a kernel run after N instructions with E031 (default 4,000,000, or NKI_SIM_OPTIONS="
        "max_instructions=N): a runaway loop otherwise fills the memory with its trace",
    )


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def positive_float_at_most(high: float) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in (0, ``high``]."""

    def parse(text: str) -> float:
        value = positive_float(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g}, got {text}")
        return value

    parse.__name__ = f"number in (0, {high:g}]"
    return parse


def _probe(directory: str) -> str | None:
    """Why a file cannot be created in ``directory`` (None if one can: created and removed)."""
    try:
        fd, path = tempfile.mkstemp(prefix=".nki-kernels-probe-", dir=directory)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(path)
    return None


def writable_dir(path: str, flag: str) -> str:
    """``path`` is (or is created as) a directory a file can be written to; else UsageError."""
    if not path.strip():
        raise UsageError(f"{flag}: empty directory name")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag} {path!r} exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {path!r}: cannot create the directory ({exc.strerror or exc})") from None
    why = _probe(path)
    if why is not None:
        raise UsageError(f"{flag} {path!r}: cannot create a file there ({why})")
    return path


def writable_file(path: str, flag: str) -> str:
    """``path`` can be written as a file (its folder is created if missing); else UsageError."""
    if not path:
        raise UsageError(f"{flag}: empty file name")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path!r} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    writable_dir(parent, f"{flag} {path!r}: its folder")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path!r}: the file exists and is not writable")
    return path


def fail(prog: str, exc: BaseException) -> int:
    """Print a usage error as one line and return exit code 2."""
    print(f"{prog}: {exc}", file=sys.stderr)
    return 2


def write_atomically(path: str, write: Callable[[str], object]) -> str:
    """Write a record whole or not at all: ``write(tmp)`` writes a temporary file beside ``path``
    (same folder, same suffix, so a format chosen by the suffix is kept), which then replaces
    ``path`` in one rename.  An interruption or a full disk leaves the old file (or none), never a
    half-written one that looks complete; the temporary file is removed."""
    folder, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    tmp = os.path.join(folder, f".{stem}.{os.getpid()}.tmp{ext}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
