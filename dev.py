#!/usr/bin/env python3
"""One-file bootstrap: create/reuse ./.venv, install the project, run a job.

    python3 dev.py verify   # main job: every kernel in the simulator vs its oracle, with estimates
    python3 dev.py test     # the test suite (what CI runs)
    python3 dev.py <any nki-kernels subcommand and flags>

Only a Python >= 3.10 with venv is needed.  The environment is reinstalled when
pyproject.toml changes (its hash is kept in .venv/.nki-kernels-installed).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("NKI_KERNELS_VENV", ROOT / ".venv"))
STAMP = VENV / ".nki-kernels-installed"


def _python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _want() -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()


def ensure_env() -> Path:
    if sys.version_info < (3, 10):
        sys.exit(f"dev.py: Python >= 3.10 is required, this is {sys.version.split()[0]}")
    py = _python()
    if not py.exists():
        print(f"[dev.py] creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    if not STAMP.exists() or STAMP.read_text() != _want():
        print("[dev.py] installing nki-kernels and its test/plot extras (first run only)", flush=True)
        pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        subprocess.check_call(pip + ["-e", f"{ROOT}[test,plot]"])
        STAMP.write_text(_want())
    return py


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    py = ensure_env()
    env = dict(os.environ)
    env.setdefault("NKI_BACKEND", "sim")
    # The interpreter issues thousands of small GEMMs: threaded BLAS only adds contention
    # (measured up to 10x slower on a busy 2-core machine).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if argv[0] == "test":
        dirs = [d for d in ("simulator_tests", "hw_tests") if (ROOT / d).is_dir()]
        cmd = [str(py), "-m", "pytest", *dirs, "-q", *argv[1:]]
        if shutil.which("shellcheck") is None and sys.platform.startswith("linux") and os.geteuid() == 0:
            # run_hw.sh's lint test needs shellcheck; install it where we can (CI runs as root).
            subprocess.call("apt-get install -y -qq shellcheck >/dev/null 2>&1 || "
                            "(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1)",
                            shell=True)
    else:
        cmd = [str(py), "-m", "nki_kernels.cli", *argv]
    return subprocess.call(cmd, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
