"""The environment variables nki-kernels reads, each validated here, in one place.

Every entry point (``nki-kernels`` and each of its subcommands, the conformance worker, the
hardware job) calls :func:`check` before any work, so a bad value is one line naming the
variable, what it holds and what is allowed, never a traceback from wherever it is first read.
The modules that read these variables keep reading them (``backend``, ``sim.options``, ...);
they are checked here first.

``python3 dev.py`` has its own variables (``NKI_KERNELS_VENV``, ``NKI_KERNELS_NO_APT``), checked
in dev.py itself because it runs before this package is installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class EnvironmentUsageError(ValueError):
    """A bad environment variable: printed as one line, exit code 2."""


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, what it may hold and what it does."""

    name: str
    allowed: str
    effect: str
    check: Callable[[str], str | None]  # the value -> None if fine, else why not


def _one_of(*values: str) -> Callable[[str], str | None]:
    def one_of(value: str) -> str | None:
        shown = ", ".join(v for v in values if v)
        return None if value.strip().lower() in values else f"allowed values are {shown}"

    return one_of


def _boolean(value: str) -> str | None:
    v = value.strip().lower()
    return None if v == "" or v in TRUE or v in FALSE else f"allowed: {', '.join(TRUE)} or {', '.join(FALSE)}"


def _sim_options(value: str) -> str | None:
    from nki_kernels.sim.options import _from_env  # here: the hardware job and cli.py import us without NumPy

    try:
        _from_env()  # parses os.environ["NKI_SIM_OPTIONS"] (== value): the one parser of the syntax
    except ValueError as exc:
        return str(exc).removeprefix("NKI_SIM_OPTIONS: ")
    return None


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            "NKI_BACKEND",
            "auto, sim or neuron (default auto)",
            "which NKI implementation the project's kernels use: the real SDK when importable (auto), "
            "always the interpreter (sim), or always the SDK (neuron)",
            _one_of("auto", "sim", "neuron", ""),
        ),
        Variable(
            "NKI_SIMULATOR",
            "1/0, true/false, yes/no, on/off",
            "NKI 0.7: run every @nki.jit call on the interpreter, as the SDK's own variable does",
            _boolean,
        ),
        Variable(
            "NKI_SIM_OPTIONS",
            "name=value,... of SimOptions fields (README, The interpreter)",
            "process-wide interpreter options",
            _sim_options,
        ),
        Variable(
            "NKI_SIM_FULL_TRACEBACK",
            "1/0, true/false, yes/no, on/off",
            "print every frame: the interpreter's own in the traceback of a coded error, nki-kernels' own in "
            "an error the command does not expect",
            _boolean,
        ),
        Variable(
            "NKI_PROGRESS",
            "auto, or 1/0, true/false, yes/no, on/off (default auto)",
            "a progress line on stderr at most once per second during long runs; auto: only when stderr is a terminal",
            _one_of("auto", "", *TRUE, *FALSE),
        ),
    )
}


def problems(names: Iterable[str] | None = None) -> list[str]:
    """One line per set variable (of ``names``, default all) whose value is not allowed."""
    out = []
    for name in VARIABLES if names is None else names:
        var = VARIABLES[name]
        if name in os.environ:
            why = var.check(os.environ[name])
            if why is not None:
                out.append(f"environment variable {name}={os.environ[name]!r}: {why} ({var.effect})")
    return out


def check(*, interpreter: bool = True, names: Iterable[str] | None = None) -> None:
    """Raise :class:`EnvironmentUsageError` (one line) for the first bad variable.

    ``interpreter=True``: the caller runs kernels on the interpreter (every ``nki-kernels``
    subcommand), so ``NKI_BACKEND=neuron``, which asks for the real SDK, is refused with the way
    out; the hardware job passes ``interpreter=False``."""
    found = problems(names)
    if found:
        raise EnvironmentUsageError(found[0])
    if interpreter and os.environ.get("NKI_BACKEND", "").strip().lower() == "neuron":
        raise EnvironmentUsageError(
            "environment variable NKI_BACKEND='neuron' asks for the real Neuron SDK, but nki-kernels runs kernels "
            "on its interpreter; unset NKI_BACKEND or set NKI_BACKEND=sim (NKI_BACKEND=neuron is for the hardware "
            "job and hw_tests on a trn2 instance, docs/hardware.md)"
        )


def progress_wanted(stream_is_terminal: bool) -> bool:
    """NKI_PROGRESS: on, off, or (auto, the default) only when the stream is a terminal."""
    v = os.environ.get("NKI_PROGRESS", "auto").strip().lower() or "auto"
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    return stream_is_terminal
