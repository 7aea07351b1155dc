#!/usr/bin/env python3
"""dev.py: create/reuse the project's virtual environment, install the project, run a job.

    python3 dev.py verify [--quick]      main job: every kernel in the simulator vs its oracle, with estimates
    python3 dev.py test [pytest args]    the test suite (what CI's .ci/run calls)
    python3 dev.py run [flags] FILE ...  run your NKI 0.1 file with neuronxcc.nki resolving to the interpreter
    python3 dev.py sim-bench             the interpreter's own speed
    python3 dev.py profile KERNEL        cost-model ESTIMATE of one kernel (summary + Perfetto timeline)
    python3 dev.py bench                 headline table of cost-model ESTIMATES
    python3 dev.py roofline              roofline PNG of the bench kernels (ESTIMATES)
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
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("NKI_KERNELS_VENV", ROOT / ".venv"))
STAMP = VENV / ".nki-kernels-installed"     # written only after a successful install
MARKER = ".nki-kernels-venv"                # written before creation: this venv is dev.py's
EXTRAS = ("test", "plot")


def say(msg: str) -> None:
    print(f"[dev.py] {msg}", flush=True)


def _python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _want() -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()


def requirements() -> list[str]:
    """The project's dependencies plus those of EXTRAS, as written in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib
        project = tomllib.loads(text)["project"]
        reqs = list(project.get("dependencies", []))
        for extra in EXTRAS:
            reqs += project.get("optional-dependencies", {}).get(extra, [])
        return reqs
    except ImportError:  # Python 3.10: no tomllib; the quoted requirement strings of [project]
        block = text.split("[project]", 1)[-1].split("neuron =", 1)[0]
        return re.findall(r'"([A-Za-z0-9_.-]+[<>=!~][^"]*)"', block)


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
    say(f"installing into {VENV}: nki-kernels (editable, from {ROOT}) with extras "
        f"{', '.join(EXTRAS)}: {', '.join(requirements())}")
    pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.check_call(pip + ["-e", f"{ROOT}[{','.join(EXTRAS)}]"])


def ensure_env() -> Path:
    """A working venv with the project installed; repairs one an interrupted run left half-made."""
    if sys.version_info < (3, 10):
        sys.exit(f"dev.py: Python >= 3.10 is required, this is {sys.version.split()[0]}")
    py = _python()
    installed = STAMP.exists() and STAMP.read_text() == _want()
    if VENV.exists() and not (installed and py.exists()) and not _pip_works(py):
        if not _is_ours():
            sys.exit(f"dev.py: {VENV} has no working python/pip and was not made by dev.py; "
                     "remove it or set NKI_KERNELS_VENV to another path")
        say(f"{VENV} is incomplete (no working pip; an interrupted first run?): recreating it")
        shutil.rmtree(VENV)
        installed = False
    if not VENV.exists():
        _create_venv()
    if not installed:
        _install(py)
        STAMP.write_text(_want())
    return py


def _shellcheck_for_tests() -> None:
    """As root on Linux, install shellcheck (the run_hw.sh lint test needs it), saying so."""
    if shutil.which("shellcheck") is not None or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return
    if os.environ.get("NKI_KERNELS_NO_APT") == "1":
        say("shellcheck missing; NKI_KERNELS_NO_APT=1, so not installing it (the run_hw.sh lint test will skip)")
        return
    say("running as root: installing shellcheck with apt-get for the run_hw.sh lint test "
        "(NKI_KERNELS_NO_APT=1 skips this)")
    rc = subprocess.call("apt-get install -y -qq shellcheck >/dev/null 2>&1 || "
                         "(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1)",
                         shell=True)
    if rc != 0:
        say(f"apt-get could not install shellcheck (exit {rc}); the run_hw.sh lint test will skip")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        py = ensure_env()
    except KeyboardInterrupt:
        print("\n[dev.py] interrupted; the next run repairs a half-made environment", file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as exc:
        print(f"[dev.py] installing failed (exit {exc.returncode}); fix the error above and rerun", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env.setdefault("NKI_BACKEND", "sim")
    # The interpreter issues thousands of small GEMMs: threaded BLAS only adds contention
    # (measured up to 10x slower on a busy 2-core machine).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if argv[0] == "test":
        _shellcheck_for_tests()
        dirs = [str(ROOT / d) for d in ("simulator_tests", "hw_tests") if (ROOT / d).is_dir()]
        cmd, cwd = [str(py), "-m", "pytest", *dirs, "-q", *argv[1:]], ROOT
    else:
        cmd, cwd = [str(py), "-m", "nki_kernels.cli", *argv], None   # the caller's directory
    try:
        return subprocess.call(cmd, cwd=cwd, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
