"""dev.py as a user meets it (issue 11, problems 3, 4, 11; `dev.py --help` vs README)."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "dev.py"
README = (ROOT / "README.md").read_text()


def load_dev(monkeypatch, venv_dir=None):
    """dev.py as a module (a fresh copy), optionally pointed at another venv directory."""
    if venv_dir is not None:
        monkeypatch.setenv("NKI_KERNELS_VENV", str(venv_dir))
    spec = importlib.util.spec_from_file_location("dev_under_test", DEV)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ --help vs README vs the CLI
def _help_subcommands() -> set[str]:
    proc = subprocess.run([sys.executable, str(DEV), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    return set(re.findall(r"^\s+python3 dev\.py ([a-z][a-z-]+)", proc.stdout, re.M))


def test_dev_help_lists_every_subcommand_and_the_readme_lists_the_same():
    from nki_kernels.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    cli_cmds = set(sub.choices)
    helped = _help_subcommands()
    assert helped == cli_cmds | {"test"}, f"dev.py --help {sorted(helped)} vs nki-kernels {sorted(cli_cmds)} + test"
    for cmd in sorted(helped):
        assert re.search(rf"python3 dev\.py {cmd}\b|^\| `{cmd}\b|, `{cmd}`", README, re.M), \
            f"README does not document `{cmd}`"
    documented = set(re.findall(r"^\| `([a-z][a-z-]+)", README.split("## Quickstart", 1)[1].split("\n## ", 1)[0], re.M))
    assert documented <= helped, f"README's entry-point table lists {documented - helped}, unknown to dev.py"


def test_readme_says_what_dev_py_installs_and_the_apt_get_as_root():
    quick = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "apt-get" in quick and "shellcheck" in quick and "NKI_KERNELS_NO_APT=1" in quick
    assert "caller" in quick or "your current directory" in quick


def test_install_message_names_every_requirement(monkeypatch, capsys):
    dev = load_dev(monkeypatch)
    reqs = dev.requirements()
    names = {re.split(r"[<>=!~ ]", r, 1)[0] for r in reqs}
    assert {"numpy", "ml_dtypes", "pytest", "hypothesis", "matplotlib"} <= names
    monkeypatch.setattr(dev.subprocess, "check_call", lambda cmd: None)
    dev._install(Path(sys.executable))
    out = capsys.readouterr().out
    assert all(r in out for r in reqs) and "editable" in out


# ------------------------------------------------------------------ problem 3: the caller's cwd
def _dev_venv_ready(monkeypatch) -> bool:
    dev = load_dev(monkeypatch)
    return dev.STAMP.exists() and dev.STAMP.read_text() == dev._want() and dev._python().exists()


def test_subcommands_run_in_the_callers_directory(tmp_path, monkeypatch):
    if not _dev_venv_ready(monkeypatch):
        pytest.skip(reason="needs the venv dev.py made (run the suite with python3 dev.py test)")
    (tmp_path / "my_kernel.py").write_text(textwrap.dedent("""
        import os, sys
        import neuronxcc.nki as nki
        open("written_here.txt", "w").write(os.getcwd())
        print("args", sys.argv[1:])
    """))
    env = {k: v for k, v in os.environ.items() if k != "NKI_KERNELS_VENV"}
    proc = subprocess.run([sys.executable, str(DEV), "run", "my_kernel.py", "--x"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "args ['--x']" in proc.stdout and "[dev.py]" not in proc.stdout     # nothing to install
    assert Path((tmp_path / "written_here.txt").read_text()).resolve() == tmp_path.resolve()
    proc = subprocess.run([sys.executable, str(DEV), "profile", "matmul", "--shape", "128,128,128", "--out", "est"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "est" / "matmul_128x128x128_bf16_benchmark_trn2.json").exists()
    assert not (ROOT / "est").exists(), "a relative --out landed inside the repository"


def test_dev_py_with_no_arguments_prints_help_and_touches_nothing(tmp_path):
    env = dict(os.environ, NKI_KERNELS_VENV=str(tmp_path / "v"))
    proc = subprocess.run([sys.executable, str(DEV)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "python3 dev.py verify" in proc.stdout
    assert not (tmp_path / "v").exists()


# ------------------------------------------------------------------ problem 4: half-made venv
class _InterruptedBuilder(venv.EnvBuilder):
    """Makes the venv without pip, then 'Ctrl-C': what an interrupted ensurepip leaves."""

    def __init__(self):
        super().__init__(with_pip=False)

    def create(self, env_dir):
        super().create(env_dir)
        raise KeyboardInterrupt


def test_interrupted_first_run_is_repaired_on_the_next(tmp_path, monkeypatch, capsys):
    target = tmp_path / "venv"
    dev = load_dev(monkeypatch, target)
    monkeypatch.setattr(dev, "_new_builder", _InterruptedBuilder)
    with pytest.raises(KeyboardInterrupt):
        dev.ensure_env()
    py = dev._python()
    assert py.exists() and not dev._pip_works(py), "the simulated interruption should leave no pip"

    installs = []
    monkeypatch.setattr(dev, "_new_builder", lambda: venv.EnvBuilder(with_pip=True))
    monkeypatch.setattr(dev, "_install", lambda p: installs.append(p))
    capsys.readouterr()
    assert dev.ensure_env() == py
    out = capsys.readouterr().out
    assert "is incomplete (no working pip" in out and "recreating it" in out
    assert dev._pip_works(py) and installs == [py]
    assert dev.STAMP.read_text() == dev._want()
    # The next run reuses it: no creation, no install, no pip probe needed.
    monkeypatch.setattr(dev, "_create_venv", lambda: pytest.fail("recreated a healthy venv"))
    assert dev.ensure_env() == py and installs == [py]


def test_a_foreign_broken_venv_is_not_deleted(tmp_path, monkeypatch):
    target = tmp_path / "theirs"
    venv.EnvBuilder(with_pip=False).create(target)            # not made by dev.py: no marker
    dev = load_dev(monkeypatch, target)
    with pytest.raises(SystemExit, match="was not made by dev.py"):
        dev.ensure_env()
    assert (target / "bin").exists() or (target / "Scripts").exists()


def test_main_reports_interruption_with_exit_130(monkeypatch, capsys):
    dev = load_dev(monkeypatch)

    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(dev, "ensure_env", interrupted)
    assert dev.main(["verify"]) == 130
    assert "next run repairs" in capsys.readouterr().err


# ------------------------------------------------------------------ problem 11: apt-get as root
@pytest.mark.parametrize("opt_out", [False, True])
def test_test_as_root_says_it_installs_shellcheck(monkeypatch, capsys, opt_out):
    dev = load_dev(monkeypatch)
    calls = []
    monkeypatch.setattr(dev, "ensure_env", lambda: Path(sys.executable))
    monkeypatch.setattr(dev.shutil, "which", lambda name: None)
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    monkeypatch.setattr(dev.sys, "platform", "linux")
    monkeypatch.setattr(dev.subprocess, "call", lambda cmd, **kw: calls.append((cmd, kw)) or 0)
    if opt_out:
        monkeypatch.setenv("NKI_KERNELS_NO_APT", "1")
    else:
        monkeypatch.delenv("NKI_KERNELS_NO_APT", raising=False)
    assert dev.main(["test", "-k", "nothing"]) == 0
    out = capsys.readouterr().out
    apt = [c for c, _ in calls if isinstance(c, str) and "apt-get install" in c]
    pytest_calls = [(c, kw) for c, kw in calls if isinstance(c, list)]
    if opt_out:
        assert apt == [] and "NKI_KERNELS_NO_APT=1, so not installing it" in out
    else:
        assert len(apt) == 1 and "installing shellcheck with apt-get" in out
    (cmd, kw), = pytest_calls
    assert cmd[1:3] == ["-m", "pytest"] and kw["cwd"] == dev.ROOT    # the suite runs in the repository
