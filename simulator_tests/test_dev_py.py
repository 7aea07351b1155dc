"""dev.py as a user meets it: --help vs README, the caller's directory, a half-made venv, apt-get as root."""

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
    from nki_kernels.commands import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    cli_cmds = set(sub.choices)
    helped = _help_subcommands()
    assert helped == cli_cmds | {"test", "install-extra"}, (
        f"dev.py --help {sorted(helped)} vs nki-kernels {sorted(cli_cmds)} + test, install-extra"
    )
    for cmd in sorted(helped):
        assert re.search(rf"python3 dev\.py {cmd}\b|^\| `{cmd}\b|, `{cmd}`", README, re.M), (
            f"README does not document `{cmd}`"
        )
    documented = set(re.findall(r"^\| `([a-z][a-z-]+)", README.split("## Quickstart", 1)[1].split("\n## ", 1)[0], re.M))
    assert documented <= helped, f"README's entry-point table lists {documented - helped}, unknown to dev.py"


def test_readme_says_what_dev_py_installs_and_the_apt_get_as_root():
    quick = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "apt-get" in quick and "shellcheck" in quick and "NKI_KERNELS_NO_APT=1" in quick
    assert "caller" in quick or "your current directory" in quick


def test_readme_names_every_package_the_first_run_installs(monkeypatch):
    """The README's first-run list omitted ruff and mypy."""
    dev = load_dev(monkeypatch)
    first_run = README.split("- **First run**", 1)[1].split("\n- ", 1)[0]
    for req in dev.requirements():
        name = re.split(r"[<>=!~ \[]", req, maxsplit=1)[0]
        assert name in first_run, f"README's first-run list lacks {name}"


def test_install_message_names_every_requirement(monkeypatch, capsys):
    dev = load_dev(monkeypatch)
    reqs = dev.requirements()
    names = {re.split(r"[<>=!~ ]", r, maxsplit=1)[0] for r in reqs}
    assert {"numpy", "ml_dtypes", "pytest", "hypothesis", "matplotlib"} <= names
    cmds = []
    monkeypatch.setattr(dev, "run_child", lambda cmd, **kw: cmds.append(cmd) or 0)
    dev._install(Path(sys.executable))
    out = capsys.readouterr().out
    assert all(r in out for r in reqs) and "editable" in out
    # the versions only dev.py's venv avoids go to pip beside the project, and are said
    ((cmd,),) = [cmds]
    assert dev.VENV_ONLY and all(v in cmd and v in out for v in dev.VENV_ONLY)


def test_dev_py_venv_has_no_version_it_avoids(monkeypatch):
    """The venv the suite runs in (when it is dev.py's) got none of the versions dev.py asks pip to avoid."""
    import importlib.metadata

    if not _dev_venv_ready(monkeypatch) or Path(sys.prefix).resolve() != load_dev(monkeypatch).VENV.resolve():
        pytest.skip(reason="not running in the venv dev.py made (run the suite with python3 dev.py test)")
    dev = load_dev(monkeypatch)
    for spec in dev.VENV_ONLY:
        name, bad = spec.split("!=")
        assert importlib.metadata.version(name) != bad, spec


# ------------------------------------------------------------------ the caller's cwd
def _dev_venv_ready(monkeypatch) -> bool:
    dev = load_dev(monkeypatch)
    return dev.STAMP.exists() and dev.STAMP.read_text() == dev._want() and dev._python().exists()


def test_subcommands_run_in_the_callers_directory(tmp_path, monkeypatch):
    if not _dev_venv_ready(monkeypatch):
        pytest.skip(reason="needs the venv dev.py made (run the suite with python3 dev.py test)")
    (tmp_path / "my_kernel.py").write_text(
        textwrap.dedent("""
        import os, sys
        import neuronxcc.nki as nki
        open("written_here.txt", "w").write(os.getcwd())
        print("args", sys.argv[1:])
    """)
    )
    env = {k: v for k, v in os.environ.items() if k != "NKI_KERNELS_VENV"}
    proc = subprocess.run(
        [sys.executable, str(DEV), "run", "my_kernel.py", "--x"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "args ['--x']" in proc.stdout and "[dev.py]" not in proc.stdout  # nothing to install
    assert Path((tmp_path / "written_here.txt").read_text()).resolve() == tmp_path.resolve()
    proc = subprocess.run(
        [sys.executable, str(DEV), "profile", "matmul", "--shape", "128,128,128", "--out", "est"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "est" / "matmul_128x128x128_bf16_benchmark_trn2.json").exists()
    assert not (ROOT / "est").exists(), "a relative --out landed inside the repository"


def test_dev_py_with_no_arguments_is_a_usage_line_as_nki_kernels_is_and_touches_nothing(tmp_path):
    """`python3 dev.py` exited 0 (its help) while `nki-kernels` exits 2: now both say a subcommand is needed."""
    env = dict(os.environ, NKI_KERNELS_VENV=str(tmp_path / "v"))
    proc = subprocess.run([sys.executable, str(DEV)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr == "dev.py: give a subcommand: verify, test, run, conformance, sim-bench, profile, bench, "
        "roofline, install-extra (python3 dev.py --help)\n"
    )
    cli = subprocess.run([sys.executable, "-m", "nki_kernels.cli"], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1
    assert not (tmp_path / "v").exists()
    helped = subprocess.run([sys.executable, str(DEV), "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "python3 dev.py verify" in helped.stdout


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_dev_py_subcommand_has_help_install_extra_too(tmp_path, flag):
    """README: "`python3 dev.py <subcommand> --help` its options"; install-extra said "give one extra ... (got
    --help)", exit 2."""
    env = dict(os.environ, NKI_KERNELS_VENV=str(tmp_path / "v"))
    proc = subprocess.run(
        [sys.executable, str(DEV), "install-extra", flag], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python3 dev.py install-extra NAME") and "cs149    torch==" in proc.stdout
    assert not (tmp_path / "v").exists()


# ------------------------------------------------------------------ half-made venv
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
    venv.EnvBuilder(with_pip=False).create(target)  # not made by dev.py: no marker
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


# ------------------------------------------------------------------ apt-get as root
@pytest.mark.parametrize("opt_out", [False, True])
def test_test_as_root_says_it_installs_shellcheck(monkeypatch, capsys, opt_out):
    dev = load_dev(monkeypatch)
    calls = []
    monkeypatch.setattr(dev, "ensure_env", lambda: Path(sys.executable))
    monkeypatch.setattr(dev.shutil, "which", lambda name: None)
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    monkeypatch.setattr(dev.sys, "platform", "linux")
    monkeypatch.setattr(dev, "run_child", lambda cmd, **kw: calls.append((cmd, kw)) or 0)
    if opt_out:
        monkeypatch.setenv("NKI_KERNELS_NO_APT", "1")
    else:
        monkeypatch.delenv("NKI_KERNELS_NO_APT", raising=False)
    assert dev.main(["test", "-k", "nothing"]) == 0
    out = capsys.readouterr().out
    apt = [c for c, _ in calls if c[:2] == ["sh", "-c"] and "apt-get install" in c[2]]
    pytest_calls = [(c, kw) for c, kw in calls if c[1:3] == ["-m", "pytest"]]
    if opt_out:
        assert apt == [] and "NKI_KERNELS_NO_APT=1, so not installing it" in out
    else:
        assert len(apt) == 1 and "installing shellcheck with apt-get" in out
    ((cmd, kw),) = pytest_calls
    assert cmd[1:3] == ["-m", "pytest"] and kw["cwd"] == dev.ROOT  # the suite runs in the repository


# ------------------------------------------------------------------ the suite in two processes
TWO_WORKERS = ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]


@pytest.mark.parametrize(
    "args, cpus, workers",
    [
        ([], 2, TWO_WORKERS),  # the whole suite (what CI runs)
        ([], 8, TWO_WORKERS),
        ([], 1, []),  # one CPU: one process, no worker start-up
        (["-k", "nothing"], 2, []),  # the user's own pytest arguments: plain pytest (-s, --pdb work)
        (["-n", "3"], 2, []),  # ... including their own worker count, passed through unchanged
    ],
)
def test_the_whole_suite_runs_in_two_worker_processes(monkeypatch, args, cpus, workers):
    dev = load_dev(monkeypatch)
    calls = []
    monkeypatch.setattr(dev, "ensure_env", lambda: Path(sys.executable))
    monkeypatch.setattr(dev, "_shellcheck_for_tests", lambda: None)
    monkeypatch.setattr(dev.os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(dev, "run_child", lambda cmd, **kw: calls.append(cmd) or 0)
    assert dev.main(["test", *args]) == 0
    (cmd,) = calls
    dirs = [str(ROOT / d) for d in ("simulator_tests", "hw_tests")]
    assert cmd[1:] == ["-m", "pytest", *dirs, "-q", *workers, *args]


# ------------------------------------------------------------------ bad input before any work
@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["bogus"], {}, "unknown subcommand 'bogus'; allowed: verify, test, run"),
        (["install-extra"], {}, "give one extra; allowed: cs149"),
        (["install-extra", "nosuch"], {}, "give one extra; allowed: cs149 (got nosuch)"),
        (["install-extra", "neuron"], {}, "only from the Neuron package repository"),
        (["verify"], {"NKI_KERNELS_NO_APT": "yes"}, "NKI_KERNELS_NO_APT='yes': allowed values are 1"),
        (["verify"], {"NKI_KERNELS_VENV": ""}, "NKI_KERNELS_VENV is empty"),
        # each was a 26-line FileNotFoundError traceback from inside the venv module
        (
            ["sim-bench"],
            {"NKI_KERNELS_VENV": "/proc/x"},
            "NKI_KERNELS_VENV '/proc/x': no folder can be created in /proc",
        ),
        (["verify"], {"NKI_KERNELS_VENV": "/dev/null"}, "NKI_KERNELS_VENV '/dev/null': exists and is not a folder"),
        (["verify"], {"NKI_KERNELS_VENV": "/dev/null/v"}, "NKI_KERNELS_VENV '/dev/null/v': /dev/null is not a folder"),
    ],
)
def test_bad_input_is_one_line_before_the_venv_is_touched(tmp_path, argv, env, message):
    if "/proc/" in env.get("NKI_KERNELS_VENV", "") and not os.path.isdir("/proc/self"):
        pytest.skip(reason="/proc is Linux's")
    full = dict(os.environ, NKI_KERNELS_VENV=str(tmp_path / "v"))
    full.update(env)
    proc = subprocess.run(
        [sys.executable, str(DEV), *argv], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert not (tmp_path / "v").exists()


# ------------------------------------------------------------------ CS149: torch through an extra
def test_install_extra_cs149_adds_a_pinned_torch_for_good(tmp_path, monkeypatch, capsys):
    """No download here: the pip command is captured.  The extra pins torch exactly (a bare `torch`
    makes pip take the newest release, on x86-64 Linux a CUDA build of several GB)."""
    dev = load_dev(monkeypatch, tmp_path / "v")
    assert dev.optional_dependencies()["cs149"] == ["torch==2.13.0"]
    pip_calls = []
    monkeypatch.setattr(dev, "_pip_works", lambda py: True)
    monkeypatch.setattr(dev, "_create_venv", lambda: dev.VENV.mkdir(parents=True))
    monkeypatch.setattr(dev, "run_child", lambda cmd, **kw: pip_calls.append(cmd) or 0)
    assert dev.main(["install-extra", "cs149"]) == 0
    assert [c[-1] for c in pip_calls] == [f"{dev.ROOT}[test,plot]", f"{dev.ROOT}[test,plot,cs149]"]
    assert "torch==2.13.0" in capsys.readouterr().out  # the install message lists it
    assert dev.extras() == ("test", "plot", "cs149")
    # A later reinstall (pyproject.toml changed) keeps the extra; asking again installs nothing.
    dev.STAMP.write_text("stale")
    assert dev.main(["install-extra", "cs149"]) == 0
    assert pip_calls[-1][-1] == f"{dev.ROOT}[test,plot,cs149]" and len(pip_calls) == 3
    assert dev.main(["install-extra", "cs149"]) == 0 and len(pip_calls) == 3
    assert "already installed" in capsys.readouterr().out


def test_readme_says_how_to_get_torch_for_the_cs149_harness():
    cs149 = README.split("## Grade your CS149 kernel on a laptop", 1)[1].split("\n## ", 1)[0]
    assert "python3 ~/nki-kernels/dev.py install-extra cs149" in cs149 and "torch" in cs149


# ------------------------------------------------------------------ signals reach the child
_WRAPPER = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("dev_under_test", {dev!r})
dev = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dev)
dev.ensure_env = lambda: Path(sys.executable)     # the venv is this interpreter
sys.exit(dev.main(["run", "child.py"]))
"""

_CHILD = """
import os, signal, sys, time
def stop(signum, frame):
    time.sleep(1.0)                               # dev.py must wait for this
    open("stopped", "w").write(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
open("child.pid", "w").write(str(os.getpid()))
time.sleep(60)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_to_dev_py_reaches_its_child_and_dev_py_waits(tmp_path, sig):
    import signal
    import time

    (tmp_path / "child.py").write_text(_CHILD)
    (tmp_path / "wrapper.py").write_text(_WRAPPER.format(dev=str(DEV)))
    env = {k: v for k, v in os.environ.items() if k != "NKI_BACKEND"}
    # A new session: no controlling terminal, so SIGINT is not delivered by a terminal either.
    proc = subprocess.Popen(
        [sys.executable, "wrapper.py"],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        pid_file = tmp_path / "child.pid"
        while not (pid_file.exists() and pid_file.read_text().strip()):  # written, not just created
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / "stopped").read_text() == sig, "dev.py exited before its child finished"
    assert proc.returncode == 0, out + err  # the child's own exit status
    if sys.platform.startswith("linux"):
        assert not Path(f"/proc/{child}").exists(), "the child outlived dev.py"


# ------------------------------------------------------------------ dev.py test FILE runs that file
def test_test_with_a_file_runs_that_file_not_the_whole_suite_too(monkeypatch):
    dev = load_dev(monkeypatch)
    calls = []
    monkeypatch.setattr(dev, "ensure_env", lambda: Path(sys.executable))
    monkeypatch.setattr(dev, "_shellcheck_for_tests", lambda: None)
    monkeypatch.setattr(dev, "run_child", lambda cmd, **kw: calls.append(cmd) or 0)
    assert (
        dev.main(["test", "simulator_tests/test_dev_py.py::test_readme_says_how_to_get_torch_for_the_cs149_harness"])
        == 0
    )
    assert dev.main(["test", "-k", "nothing"]) == 0
    named, selected = calls
    assert str(ROOT / "simulator_tests") not in named and named[-1].startswith("simulator_tests/test_dev_py.py::")
    assert str(ROOT / "simulator_tests") in selected  # -k alone: over the whole suite


def test_a_closed_stdout_ends_dev_py_quietly_before_it_makes_anything(tmp_path):
    """`python3 dev.py verify | head -1` on a first run: the "[dev.py] creating ..." line met the closed pipe."""
    read, write = os.pipe()
    os.close(read)
    env = dict(os.environ, NKI_KERNELS_VENV=str(tmp_path / "v"))
    proc = subprocess.Popen(
        [sys.executable, str(DEV), "sim-bench"], cwd=tmp_path, env=env, stdout=write, stderr=subprocess.PIPE, text=True
    )
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err == ""
    assert not (tmp_path / "v").exists()
