"""What the conformance suites, the runner and the command share: the suites' names, the options a suite
is given and the result it reports."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

SUITE_NAMES = ("sdk-tests", "sdk-examples", "sdk-docstrings", "nki-library")
OUTCOMES = ("pass", "fail", "error", "xfail", "xpass", "skip")
BAD = ("fail", "error")


@dataclass
class Result:
    """The outcome of one test, example or snippet of any suite."""

    suite: str
    id: str  # unique within the suite: file::Class::method, an example's label, a pytest node id
    file: str
    outcome: str
    seconds: float
    message: str = ""
    traceback: str = ""
    output: str = ""
    marks: list[str] = field(default_factory=list)
    cpu: float = 0.0  # CPU seconds of the test's own process time where the suite measures it (nki-library)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r}; allowed: {', '.join(OUTCOMES)}")


@dataclass(frozen=True)
class Options:
    """What the suites are given: the checkouts, the library's Python, limits and selections."""

    sdk: str | None = None
    nki_library: str | None = None
    library_python: str = sys.executable
    timeout: float = 300.0  # seconds per process: a test method (sdk-tests) or a test file (nki-library)
    jobs: int = 1
    select: str | None = None  # only ids containing this substring
    only: tuple[str, ...] = ()  # nki-library: only test files whose path contains one of these


Report = Callable[[Result], None]
