#!/usr/bin/env python3
"""dev.py: create/reuse the project's virtual environment, install the project, run a job.

    python3 dev.py verify [--quick]      main job: every kernel in the simulator vs its oracle, with estimates
    python3 dev.py test [pytest args]    the test suite (what CI's .ci/run calls; 2 processes without args)
    python3 dev.py run [flags] FILE ...  run your NKI file, neuronxcc.nki (0.1) / nki (0.7) aliased to the interpreter
    python3 dev.py conformance PATH      public NKI code (aws-neuron-sdk checkout, nki-library) on the interpreter
    python3 dev.py sim-bench             the interpreter's own speed
    python3 dev.py profile KERNEL        cost-model ESTIMATE of one kernel (summary + Perfetto timeline)
    python3 dev.py bench                 headline table of cost-model ESTIMATES
    python3 dev.py roofline              roofline PNG of the bench kernels (ESTIMATES)
    python3 dev.py install-extra cs149   add torch to the venv (the official CS149 harnesses' reference needs it)
    python3 dev.py SUBCOMMAND --help     the options of one subcommand

Working directory: every subcommand except `test` runs in the directory you call dev.py from,
so `python3 path/to/dev.py run my_kernel.py --out results` reads and writes there.  `test`
runs the repository's suite in the repository.

Environment: <repository>/.venv (or $NKI_KERNELS_VENV).  Only a Python >= 3.10 with venv is
needed.  The first run creates the venv (python -m venv, with pip) and pip-installs the
project in editable mode with its `test` and `plot` extras (it prints the package list);
pyproject.toml changes trigger a reinstall.  A venv left half-made by an interrupted first
run (no working pip) is detected and recreated on the next run.

As root on Linux, `dev.py test` installs shellcheck with apt-get when it is missing (the
lint test of scripts/run_hw.sh needs it) and prints that it does; set NKI_KERNELS_NO_APT=1
to skip it (that test then skips with its reason).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("NKI_KERNELS_VENV", ROOT / ".venv"))
STAMP = VENV / ".nki-kernels-installed"  # written only after a successful install
MARKER = ".nki-kernels-venv"  # written before creation: this venv is dev.py's
EXTRAS = ("test", "plot")  # always installed
ADDED = VENV / ".nki-kernels-extras"  # extras added with `dev.py install-extra NAME`, one per line
# Versions this venv avoids (not the package's own requirements: `pip install -e .` into a Neuron venv must
# not move its packages).  ml_dtypes 0.7.0 with NumPy 2.4 took 0.75-1.0 s of CPU to import (its ufunc loop
# registration), 0.6.0 0.03 s, in every interpreter process: each `dev.py run`, each `verify` worker.
VENV_ONLY = ("ml_dtypes!=0.7.0",)


def say(msg: str) -> None:
    print(f"[dev.py] {msg}", flush=True)


def subcommands() -> list[str]:
    """The subcommands this help text lists (`test` and nki-kernels' own)."""
    return re.findall(r"^\s+python3 dev\.py ([a-z][a-z0-9-]*)", __doc__ or "", re.M)


def _terminal_delivers_sigint() -> bool:
    """True when a Ctrl-C typed in our terminal reaches the child by itself: we are in the
    terminal's foreground process group, which the child shares."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (OSError, AttributeError):
            continue
    return False


def run_child(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> int:
    """Run ``cmd`` and wait for it, forwarding SIGTERM and SIGHUP to it, and SIGINT unless the terminal
    already delivered it (a Ctrl-C reaches the whole foreground process group).  dev.py never exits
    before its child: ``kill -TERM`` of dev.py ends the child first.  Returns the child's exit status,
    the shell's way (128 + N when signal N ended it)."""
    forwarded = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    box: list[subprocess.Popen[bytes]] = []
    early: list[int] = []
    sigint_from_terminal = _terminal_delivers_sigint()

    def forward(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and sigint_from_terminal:
            return
        if not box:
            early.append(signum)  # arrived before the child started: sent right after
        elif box[0].poll() is None:
            box[0].send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in forwarded}
    try:
        box.append(subprocess.Popen(cmd, cwd=cwd, env=env))
        for signum in early:
            box[0].send_signal(signum)
        rc = box[0].wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - rc if rc < 0 else rc


def _python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def extras() -> tuple[str, ...]:
    """EXTRAS plus the ones added to this venv with `install-extra`."""
    added = ADDED.read_text().split() if ADDED.exists() else []
    return EXTRAS + tuple(e for e in added if e not in EXTRAS)


def _want() -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(sys.version.encode())
    h.update(",".join(extras()).encode())
    h.update(",".join(VENV_ONLY).encode())
    return h.hexdigest()


def optional_dependencies() -> dict[str, list[str]]:
    """pyproject.toml's [project.optional-dependencies] (a small parser where tomllib is missing)."""
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib
    except ImportError:  # Python 3.10
        block = text.split("[project.optional-dependencies]", 1)[-1].split("\n[", 1)[0]
        return {
            name: re.findall(r'"([^"]+)"', body)
            for name, body in re.findall(r"^([A-Za-z0-9_-]+) = \[(.*?)\]", block, re.M | re.S)
        }
    return dict(tomllib.loads(text)["project"].get("optional-dependencies", {}))


def requirements() -> list[str]:
    """The project's dependencies plus those of the installed extras, as written in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)\]", text, re.M | re.S)
    reqs = re.findall(r'"([^"]+)"', deps.group(1)) if deps else []
    opt = optional_dependencies()
    for extra in extras():
        reqs += opt.get(extra, [])
    return reqs


def _pip_works(py: Path) -> bool:
    if not py.exists():
        return False
    proc = subprocess.run([str(py), "-m", "pip", "--version"], capture_output=True, timeout=120)
    return proc.returncode == 0


def _is_ours() -> bool:
    return (VENV / MARKER).exists() or VENV == ROOT / ".venv"


def _new_builder() -> venv.EnvBuilder:
    return venv.EnvBuilder(with_pip=True)


def _create_venv() -> None:
    say(f"creating the virtual environment {VENV} (python -m venv, with pip)")
    VENV.mkdir(parents=True, exist_ok=True)
    (VENV / MARKER).write_text("created by nki-kernels dev.py; complete once .nki-kernels-installed exists\n")
    _new_builder().create(VENV)


def _install(py: Path) -> None:
    say(
        f"installing into {VENV}: nki-kernels (editable, from {ROOT}) with extras "
        f"{', '.join(extras())}: {', '.join(requirements())}; in this venv also {', '.join(VENV_ONLY)}"
    )
    pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    cmd = pip + [*VENV_ONLY, "-e", f"{ROOT}[{','.join(extras())}]"]
    rc = run_child(cmd)
    if rc in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        raise KeyboardInterrupt
    if rc != 0:
        raise subprocess.CalledProcessError(rc, cmd)


def ensure_env() -> Path:
    """A working venv with the project installed; repairs one an interrupted run left half-made."""
    if sys.version_info < (3, 10):  # noqa: UP036 - dev.py runs on whatever python3 the user has
        sys.exit(f"dev.py: Python >= 3.10 is required, this is {sys.version.split()[0]}")
    py = _python()
    installed = STAMP.exists() and STAMP.read_text() == _want()
    if VENV.exists() and not (installed and py.exists()) and not _pip_works(py):
        if not _is_ours():
            sys.exit(
                f"dev.py: {VENV} has no working python/pip and was not made by dev.py; "
                "remove it or set NKI_KERNELS_VENV to another path"
            )
        say(f"{VENV} is incomplete (no working pip; an interrupted first run?): recreating it")
        shutil.rmtree(VENV)
        installed = False
    if not VENV.exists():
        _create_venv()
    if not installed:
        _install(py)
        STAMP.write_text(_want())
    return py


def suite_workers(args: list[str]) -> list[str]:
    """pytest-xdist flags for `dev.py test`: the whole suite (no arguments) runs in 2 worker
    processes, a test file per worker at a time (`--dist loadfile`: a module's fixtures are built
    once; in collection order, which simulator_tests/conftest.py starts with the slowest file): 249-261 s
    of wall time against 510-530 s in one process on a 2-core machine.  With any pytest
    argument the run is the user's to shape (one process unless it says `-n N`), so `-s`, `--pdb`
    and a quick `-k` work as in plain pytest."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if args or cpus < 2:
        return []
    return ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]


def _shellcheck_for_tests() -> None:
    """As root on Linux, install shellcheck (the run_hw.sh lint test needs it), saying so."""
    if shutil.which("shellcheck") is not None or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return
    if os.environ.get("NKI_KERNELS_NO_APT") == "1":
        say("shellcheck missing; NKI_KERNELS_NO_APT=1, so not installing it (the run_hw.sh lint test will skip)")
        return
    say(
        "running as root: installing shellcheck with apt-get for the run_hw.sh lint test "
        "(NKI_KERNELS_NO_APT=1 skips this)"
    )
    rc = run_child(
        [
            "sh",
            "-c",
            "apt-get install -y -qq shellcheck >/dev/null 2>&1 || "
            "(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1)",
        ]
    )
    if rc != 0:
        say(f"apt-get could not install shellcheck (exit {rc}); the run_hw.sh lint test will skip")


def _venv_path_problem(path: Path) -> str | None:
    """Why a venv cannot be made at ``path`` (None if it exists as a folder or can be created): a folder
    is created and removed in its nearest existing ancestor (``/proc/x``: a FileNotFoundError traceback
    26 lines long, from inside the venv module, before this check)."""
    if path.exists():
        return None if path.is_dir() else "exists and is not a folder"
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".nki-kernels-probe-", dir=ancestor))
    except OSError as exc:
        return f"no folder can be created in {ancestor} ({exc.strerror or exc})"
    return None


def _check_own_environment() -> str | None:
    """dev.py's own variables (the package's are checked by nki-kernels itself)."""
    no_apt = os.environ.get("NKI_KERNELS_NO_APT")
    if no_apt is not None and no_apt.strip() not in ("", "0", "1"):
        return f"environment variable NKI_KERNELS_NO_APT={no_apt!r}: allowed values are 1 (do not apt-get) or 0"
    if os.environ.get("NKI_KERNELS_VENV") == "":
        return "environment variable NKI_KERNELS_VENV is empty: unset it (default <repository>/.venv) or give a path"
    why = _venv_path_problem(VENV)
    if why is not None:
        where = "NKI_KERNELS_VENV" if "NKI_KERNELS_VENV" in os.environ else "the default venv path"
        return f"{where} {str(VENV)!r}: {why}; set NKI_KERNELS_VENV to a folder you can write"
    return None


def _ensure() -> Path | int:
    """ensure_env(), or the exit status after saying why it failed."""
    try:
        return ensure_env()
    except KeyboardInterrupt:
        print("\n[dev.py] interrupted; the next run repairs a half-made environment", file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as exc:
        print(f"[dev.py] installing failed (exit {exc.returncode}); fix the error above and rerun", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # stdout closed: __main__ exits 141
    except OSError as exc:  # a full disk, a folder that went away: one line, not venv's traceback
        print(f"[dev.py] cannot set up {VENV}: {exc}; fix it and rerun", file=sys.stderr)
        return 1


def install_extra(args: list[str]) -> int:
    """`install-extra NAME`: install an optional extra of pyproject.toml into the venv, for good (later
    reinstalls keep it)."""
    available = [n for n in optional_dependencies() if n not in EXTRAS and n != "neuron"]
    if args in (["-h"], ["--help"]):
        deps = optional_dependencies()
        print("usage: python3 dev.py install-extra NAME\n")
        print("Install an optional extra of pyproject.toml into the venv, for good (later reinstalls keep it).")
        print("NAME, one of:")
        for n in available:
            print(f"  {n}    {' '.join(deps[n])}")
        return 0
    if len(args) != 1 or args[0] not in available + ["neuron"]:
        print(
            f"dev.py install-extra: give one extra; allowed: {', '.join(available)} (got {' '.join(args) or 'none'})",
            file=sys.stderr,
        )
        return 2
    name = args[0]
    if name == "neuron":
        print(
            "dev.py install-extra: the neuron extra (neuronx-cc, torch-neuronx) installs only from the Neuron "
            "package repository on x86-64 Linux, not from PyPI; see docs/hardware.md",
            file=sys.stderr,
        )
        return 2
    py = _ensure()
    if isinstance(py, int):
        return py
    if name in extras():
        say(f"the {name} extra is already installed in {VENV}")
        return 0
    ADDED.write_text("\n".join([*extras()[len(EXTRAS) :], name]) + "\n")
    py = _ensure()
    return py if isinstance(py, int) else 0


def main(argv: list[str]) -> int:
    known = subcommands()
    if not argv:  # as `nki-kernels` without a subcommand: a usage error, exit 2
        print(f"dev.py: give a subcommand: {', '.join(known)} (python3 dev.py --help)", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] not in known:
        print(
            f"dev.py: unknown subcommand {argv[0]!r}; allowed: {', '.join(known)} (python3 dev.py --help)",
            file=sys.stderr,
        )
        return 2
    problem = _check_own_environment()
    if problem:
        print(f"dev.py: {problem}", file=sys.stderr)
        return 2
    if argv[0] == "install-extra":
        return install_extra(argv[1:])
    py = _ensure()
    if isinstance(py, int):
        return py
    env = dict(os.environ)
    env.setdefault("NKI_BACKEND", "sim")
    # The interpreter issues thousands of small GEMMs: threaded BLAS only adds contention
    # (measured up to 10x slower on a busy 2-core machine).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if argv[0] == "test":
        _shellcheck_for_tests()
        # the test folders, unless the arguments name tests themselves (`dev.py test simulator_tests/test_cli.py`
        # ran the whole suite too)
        named = [a for a in argv[1:] if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
        dirs = [] if named else [str(ROOT / d) for d in ("simulator_tests", "hw_tests") if (ROOT / d).is_dir()]
        cmd, cwd = [str(py), "-m", "pytest", *dirs, "-q", *suite_workers(argv[1:]), *argv[1:]], ROOT
    else:
        cmd, cwd = [str(py), "-m", "nki_kernels.cli", *argv], None  # the caller's directory
    return run_child(cmd, cwd=cwd, env=env)


def _stdout_closed() -> int:
    """`python3 dev.py verify | head -1` on a first run: a [dev.py] line met the closed pipe.  Exit as a
    process ended by SIGPIPE (141), with stdout on /dev/null so that the final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        code = _stdout_closed()
    except KeyboardInterrupt:
        print("\n[dev.py] interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)
