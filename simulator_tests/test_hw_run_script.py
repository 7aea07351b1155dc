"""scripts/run_hw.sh, run against fake neuron-ls / neuron-profile / Neuron SDK (scripts/fakes)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from cli_testing import session_processes

from nki_kernels.hw import job
from nki_kernels.hw import run as hw_run
from nki_kernels.kernels import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "run_hw.sh"
FAKES = ROOT / "scripts" / "fakes"
SHELL_FILES = [SCRIPT, FAKES / "bin/neuron-ls", FAKES / "bin/neuron-profile", FAKES / "venv/bin/python"]


@pytest.fixture
def fake(tmp_path):
    """Environment of a fake trn2.3xlarge: tools on PATH, SDK 2.26 on PYTHONPATH, a venv."""
    product = tmp_path / "product_name"
    product.write_text("trn2.3xlarge\n")
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NKI_HW_", "FAKE_", "NEURON_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env = dict(
        base,
        PATH=f"{FAKES / 'bin'}{os.pathsep}{base['PATH']}",
        PYTHONPATH=f"{FAKES / 'sdk'}{os.pathsep}{FAKES / 'kernels'}",
        NKI_HW_PRODUCT_NAME_FILE=str(product),
        NKI_HW_VENV_CANDIDATES=str(tmp_path / "no-such-venv"),
        NKI_HW_KERNEL_MATMUL="fake_hw_kernels:matmul",
        NKI_HW_KERNEL_CONV2D="fake_hw_kernels:conv2d",
        FAKE_REAL_PYTHON=sys.executable,
        FAKE_LOG=str(tmp_path / "fake.log"),
        # the kernels' construct smoke test needs a device; tests that want one bring their own
        NKI_HW_CONSTRUCTS_TEST=str(tmp_path / "no_constructs_test.py"),
    )
    return {
        "env": env,
        "tmp": tmp_path,
        "results": tmp_path / "results",
        "log": tmp_path / "fake.log",
        "venv": str(FAKES / "venv"),
        "product": product,
        "base": base,
    }


def run(fake, *args, env=None, venv=True, timeout=90):
    argv = ["bash", str(SCRIPT), "--results-dir", str(fake["results"])]
    if venv:
        argv += ["--venv", fake["venv"]]
    argv += args
    return subprocess.run(argv, env=env or fake["env"], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def run_folders(fake):
    return sorted(p for p in fake["results"].iterdir()) if fake["results"].exists() else []


def fake_log(fake):
    return fake["log"].read_text().splitlines() if fake["log"].exists() else []


# ------------------------------------------------------------------------- static checks
def test_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip(reason="shellcheck not installed (python3 dev.py test installs it as root)")
    proc = subprocess.run(["shellcheck", *map(str, SHELL_FILES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_help_documents_every_option_and_exit_code():
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    text = proc.stdout
    for code in hw_run.Exit:
        assert re.search(rf"^\s+{int(code)}\s", text, re.M), f"exit code {int(code)} not in --help"
    helped = set(re.findall(r"^\s+(--[a-z-]+)", text, re.M))
    assert helped | {"--help"} == set(hw_run.OPTIONS), "options in --help and in the parser differ"
    assert "-h, --help" in text
    assert {"--kernels", "--shapes", "--cores", "--timeout", "--dry-run"} <= helped


def test_the_script_is_a_short_launcher_of_the_python_job():
    lines = SCRIPT.read_text().splitlines()
    assert len(lines) <= 60
    assert any(line.startswith("exec ") and "-m nki_kernels.hw.run" in line for line in lines)
    assert not any("python" in line and "<<" in line for line in lines), "no embedded Python"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--frobnicate"], "unknown option '--frobnicate'"),
        (["stray"], "unknown option 'stray'"),
        (["--shapes", "huge"], "--shapes must be quick, cs149 or full"),
        (["--kernels", "conv3d"], "unknown kernel 'conv3d'; allowed: conv2d, matmul, attention"),
        (["--kernels", ""], "--kernels: empty kernel list ''"),
        (["--kernels=,"], "--kernels: empty kernel list"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
        (["--timeout", "1e3"], "--timeout must be a positive number of seconds, got '1e3'"),
        (["--warmup", "-1"], "--warmup must be a non-negative integer, got '-1'"),
        (["--iters", "0"], "--iters must be a positive integer, got '0'"),
        (["--cores", "two"], "--cores must be a count"),
        (["--cores", "0"], "--cores must be a count >= 1"),
        (["--cores", "3-1"], "--cores range '3-1' runs backwards"),
        (["--cores", "0-3-5"], "--cores must be a count"),
        # huge values were accepted (a 560 KB plan line for --cores 99999), duplicates too
        (["--cores", "99999"], "--cores 99999: at most 128"),
        (["--cores", "0,0"], "--cores '0,0': core 0 is listed twice"),
        (["--cores", "0-3,2"], "--cores '0-3,2': core 2 is listed twice"),
        (["--cores", "0,128"], "--cores '0,128': core id 128 does not exist; ids are 0..127"),
        (["--iters", "99999999999999999999"], "--iters 99999999999999999999: at most 1,000,000"),
        (["--warmup", "1000001"], "--warmup 1000001: at most 1,000,000"),
        (["--timeout", "604801"], "--timeout 604801: at most 604,800"),
        ({"NKI_HW_STOP_GRACE": "99999"}, "NKI_HW_STOP_GRACE=99999: at most 3600 seconds"),
        (["--timeout"], "--timeout needs a value"),
        (["--venv", ""], "--venv needs a value, got an empty one"),
        (["--results-dir="], "--results-dir needs a value, got an empty one"),
        (["--dry-run=yes"], "--dry-run takes no value"),
        ({"NKI_HW_STOP_GRACE": "soon"}, "NKI_HW_STOP_GRACE must be a whole number of seconds, got 'soon'"),
        ({"NKI_SIM_OPTIONS": "garbage"}, "NKI_SIM_OPTIONS"),  # the variables every entry point checks
        ({"NKI_BACKEND": "bogus"}, "NKI_BACKEND"),
    ],
)
def test_usage_errors_exit_2(fake, args, message):
    env = dict(fake["env"], **args) if isinstance(args, dict) else None
    proc = run(fake, *([] if isinstance(args, dict) else args), env=env)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, "a bad argument is one line"
    assert proc.stdout == "" and run_folders(fake) == []
    assert fake_log(fake) == [], "a bad argument must stop the job before any probe"


# ------------------------------------------------------------------------- dry run
def test_dry_run_prints_every_command_and_runs_nothing(fake):
    proc = run(fake, "--dry-run", "--kernels", "conv2d,matmul", "--cores", "2", "--shapes", "quick")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "FAIL" not in out and "NeuronCores 0 1" in out
    assert "-m pip install" in out and "-m pytest" in out and "hw_tests" in out
    cases = registry.select("conv2d,matmul", "quick", bench=True)
    for case in cases:
        stem = job.stem(case)
        assert f"neuron-profile capture -n {stem}.neff -s {stem}.ntff" in out
        for fmt in ("summary-json", "summary-text", "perfetto"):
            assert f"-s {stem}.ntff --output-format {fmt}" in out
        assert f"nki_kernels.hw.job bench --kernel {case.kernel} --case {case.name}" in out
        assert f"nki_kernels.hw.job estimate --kernel {case.kernel} --case {case.name}" in out
    assert "NEURON_RT_VISIBLE_CORES=0" in out and "NEURON_RT_VISIBLE_CORES=1" in out
    assert run_folders(fake) == []
    assert fake_log(fake) == ["neuron-ls --json-output"], "dry run ran more than the read-only probe"


@pytest.mark.parametrize(
    "cores, spread",
    [
        ("0,8", {"0": [1, 3, 5], "8": [2, 4]}),  # the help's own example, shown as it was: <0,8>
        ("4-5", {"4": [1, 3, 5], "5": [2, 4]}),
        ("3", {"0": [1, 4], "1": [2, 5], "2": [3]}),  # a count: the lowest ids
    ],
)
def test_dry_run_without_a_device_shows_how_the_jobs_are_spread(fake, cores, spread):
    """No device (fake neuron-ls lists none): the plan names the cores --cores gives and each core's jobs."""
    env = dict(fake["env"], FAKE_NEURON_LS="none")
    proc = run(fake, "--dry-run", "--kernels", "matmul,conv2d", "--cores", cores, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "<" not in out.split("plan:", 1)[1].split("\n", 1)[0], out
    assert f"on NeuronCore(s) {' '.join(spread)}," in out
    for core, jobs in spread.items():
        assert f"  core {core}: jobs {', '.join(map(str, jobs))}" in out
        assert f"NEURON_RT_VISIBLE_CORES={core} " in out
        for j in jobs:
            assert f"# job {j}/5 on core {core}:" in out


def test_dry_run_lists_preflight_failures_and_still_exits_0(fake):
    env = dict(fake["env"], PATH=fake["base"]["PATH"], NKI_HW_PRODUCT_NAME_FILE=str(fake["tmp"] / "none"))
    proc = run(fake, "--dry-run", "--kernels", "matmul", env=env, venv=False)
    assert proc.returncode == 0, proc.stderr
    for code, text in (
        (10, "instance type is 'unreadable'"),
        (11, "neuron-ls not found"),
        (13, "no Neuron venv"),
        (15, "neuron-profile not found"),
    ):
        assert f"FAIL[{code}] {text}" in proc.stdout
    assert "a real run would stop here with exit code 10" in proc.stdout
    assert "neuron-profile capture -n matmul_k128_m128_n512_fp32.neff" in proc.stdout
    assert run_folders(fake) == []


@pytest.mark.parametrize("where", ["/proc/x", "a_file"])
def test_an_unwritable_results_folder_is_found_at_preflight(fake, where):
    target = where
    if where == "a_file":
        target = str(fake["tmp"] / "a_file")
        pathlib.Path(target).write_text("not a folder")
    dry = run(fake, "--dry-run", "--kernels", "matmul", "--results-dir", target)
    assert dry.returncode == 0, dry.stderr
    assert f"FAIL[17] results folder {target} cannot be created: " in dry.stdout
    assert "a real run would stop here with exit code 17" in dry.stdout
    real = run(fake, "--kernels", "matmul", "--results-dir", target)
    assert real.returncode == 17, real.stdout + real.stderr
    assert "preflight failed (exit 17); nothing was run" in real.stderr
    assert not any(line.startswith(("pip", "nki.benchmark")) for line in fake_log(fake))


# ------------------------------------------------------------------------- preflight
def _link_only(fake, *tools):
    """A PATH holding only the named fake tools (plus the system's)."""
    bin_dir = fake["tmp"] / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).symlink_to(FAKES / "bin" / tool)
    return f"{bin_dir}{os.pathsep}{fake['base']['PATH']}"


@pytest.mark.parametrize(
    "setup, args, code, message",
    [
        ("not_trn2", [], 10, "instance type is 'm7i.large'"),
        ("no_device", [], 11, "neuron-ls lists no Neuron device"),
        ("neuron_ls_fails", [], 11, "neuron-ls --json-output failed"),
        ("no_profiler", [], 15, "neuron-profile not found"),
        ("no_venv", [], 13, "no Neuron venv: tried"),
        ("wrong_sdk", [], 12, "lacks neuronxcc.nki (neuronx-cc 2.23.6484.0+fake, SDK 2.28)"),
        ("no_sdk", [], 12, "neuronx-cc is not installed"),
        ("busy", [], 14, "asked for 1 free NeuronCores, only 0 free"),
        ("ok", ["--cores", "5"], 14, "asked for 5 free NeuronCores, only 4 free"),
        ("ok", ["--cores", "2-9"], 14, "NeuronCores [4, 5, 6, 7, 8, 9] are busy or absent"),
    ],
)
def test_preflight_failures_have_distinct_exit_codes(fake, setup, args, code, message):
    env, venv = dict(fake["env"]), True
    if setup == "not_trn2":
        fake["product"].write_text("m7i.large\n")
    elif setup == "no_device":
        env["FAKE_NEURON_LS"] = "none"
    elif setup == "neuron_ls_fails":
        env["FAKE_NEURON_LS"] = "fail"
    elif setup == "no_profiler":
        env["PATH"] = _link_only(fake, "neuron-ls")
    elif setup == "no_venv":
        venv = False
    elif setup == "wrong_sdk":
        env["PYTHONPATH"] = str(FAKES / "sdk_2_28")
    elif setup == "no_sdk":
        env["PYTHONPATH"] = ""
    elif setup == "busy":
        env["FAKE_NEURON_LS"] = "busy"
    proc = run(fake, "--kernels", "matmul", *args, env=env, venv=venv)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert f"preflight failed (exit {code}); nothing was run" in proc.stderr
    assert run_folders(fake) == []
    assert not any(line.startswith(("pip", "nki.benchmark")) for line in fake_log(fake))


# ------------------------------------------------------------------------- full fake runs
def _manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def test_full_fake_run_writes_results_folder_and_manifest(fake):
    proc = run(
        fake,
        "--kernels",
        "matmul,conv2d",
        "--shapes",
        "quick",
        "--cores",
        "2",
        "--no-estimate",
        "--warmup",
        "2",
        "--iters",
        "5",
    )
    # No /dev/neuron* and no torch-neuronx here: the hw_tests steps must fail, not pass by skipping.
    assert proc.returncode == 20, proc.stdout + proc.stderr
    (folder,) = run_folders(fake)
    assert re.fullmatch(r"\d{8}T\d{6}Z-([0-9a-f]{4,40}|nogit)", folder.name)
    m = _manifest(folder)
    assert (m["status"], m["exit_code"]) == ("completed_with_failures", 20)
    assert m["options"]["shapes"] == "quick" and m["environment"]["cores"] == "0 1"
    assert m["environment"]["sdk"]["neuronx_cc"] == "2.21.18209.0+fake"
    assert m["environment"]["neuron_ls"][0]["instance_type"] == "trn2.3xlarge"
    steps = {s["name"]: s for s in m["steps"]}
    assert steps["install"]["status"] == "passed" and any(line.startswith("pip install") for line in fake_log(fake))
    for kernel in ("matmul", "conv2d"):
        st = steps[f"hw_tests-{kernel}"]
        assert (st["status"], st["exit_code"]) == ("failed", 4)
        assert "no Neuron device" in (folder / st["log"]).read_text()
    files = {f["path"] for f in m["files"]}
    cases = registry.select("matmul,conv2d", "quick", bench=True)
    for case in cases:
        stem = job.stem(case)
        for prefix in ("bench", "capture", "summary-json", "summary-text", "perfetto"):
            assert steps[f"{prefix}-{stem}"]["status"] == "passed", prefix
        for suffix in (".neff", ".ntff", ".summary.json", ".summary.txt", ".pftrace"):
            assert f"{case.kernel}/{case.name}/{stem}{suffix}" in files
        bench = json.loads((folder / case.kernel / case.name / "bench.json").read_text())
        assert (bench["warmup"], bench["iters"], bench["p50_us"], bench["p99_us"]) == (2, 5, 150.0, 199.0)
        assert bench["core"] == steps[f"bench-{stem}"]["core"]
    assert {steps[f"bench-{job.stem(c)}"]["core"] for c in cases} == {"0", "1"}, "jobs not spread over cores"
    assert {"manifest.json", "SUMMARY.md", "env/neuron-ls.json", "env/sdk.json"} <= files
    summary = (folder / "SUMMARY.md").read_text()
    assert "completed_with_failures" in summary and "hw_tests-matmul" in summary and "| conv2d |" in summary
    assert "construct smoke test skipped:" in proc.stdout and "no_constructs_test.py not found" in proc.stdout
    # One progress line per job: "[3/18] conv2d b1_ci128_... ok 0:41".
    n = len(cases) + 2
    lines = [line for line in proc.stdout.splitlines() if re.match(r"^\[\d+/\d+\] ", line)]
    assert len(lines) == n, proc.stdout
    pat = re.compile(
        rf"^\[(\d+)/{n}\] (hw_tests (matmul|conv2d)|(matmul|conv2d) \S+) \.\.\. "
        r"(ok|FAILED \(\d+ step\(s\), see above\)) \d+:\d\d$"
    )
    assert all(pat.match(line) for line in lines), lines
    assert sorted(int(pat.match(line).group(1)) for line in lines) == list(range(1, n + 1))
    assert all(" ok " in line for line in lines if "hw_tests" not in line)
    assert all("FAILED" in line for line in lines if "hw_tests" in line)  # no device: must fail


def test_relative_venv_and_results_paths_work_from_any_folder(fake, tmp_path):
    """The steps run in other folders (the case folder, the checkout): relative paths given on the
    command line must still name the same venv and results folder."""
    work = tmp_path / "work"
    work.mkdir()
    venv = os.path.relpath(fake["venv"], work)
    proc = subprocess.run(
        [
            "bash",
            str(SCRIPT),
            "--venv",
            venv,
            "--results-dir",
            "res",
            "--kernels",
            "matmul",
            "--skip-tests",
            "--skip-install",
            "--no-estimate",
            "--iters",
            "2",
        ],
        env=fake["env"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=work,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (folder,) = (work / "res").iterdir()
    assert _manifest(folder)["status"] == "completed"


def test_second_run_never_overwrites_the_first(fake):
    args = ("--kernels", "matmul", "--skip-install", "--skip-tests", "--no-estimate", "--iters", "3")
    first = run(fake, *args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert _manifest(run_folders(fake)[0])["status"] == "completed"
    (folder1,) = run_folders(fake)
    before = {p: p.read_bytes() for p in folder1.rglob("*") if p.is_file()}
    second = run(fake, *args)
    assert second.returncode == 0, second.stderr
    folders = run_folders(fake)
    assert len(folders) == 2 and folder1 in folders
    assert {p: p.read_bytes() for p in folder1.rglob("*") if p.is_file()} == before
    names = {s["name"] for s in _manifest(folders[1])["steps"]}
    assert "bench-matmul_k128_m128_n512_fp32" in names
    assert not any(n.startswith(("install", "hw_tests")) for n in names), names


@pytest.mark.parametrize(
    "sig, code, name",
    [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM"), (signal.SIGHUP, 129, "SIGHUP")],
)
def test_interruption_keeps_finished_results_and_marks_the_run(fake, sig, code, name):
    env = dict(fake["env"], FAKE_NKI_BENCH_SECONDS="60")
    argv = [
        "bash",
        str(SCRIPT),
        "--results-dir",
        str(fake["results"]),
        "--venv",
        fake["venv"],
        "--kernels",
        "matmul,conv2d",
        "--skip-tests",
        "--no-estimate",
    ]
    planned = registry.select("matmul,conv2d", "quick", bench=True)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.time() + 30
        while not any(line.startswith("nki.benchmark") for line in fake_log(fake)):
            assert proc.poll() is None and time.time() < deadline, "benchmark step never started"
            time.sleep(0.1)
        # While it runs, the manifest already lists every planned job.
        (folder,) = run_folders(fake)
        running = _manifest(folder)
        assert [j["what"] for j in running["jobs"]] == [f"{c.kernel} {c.name}" for c in planned]
        assert [j["status"] for j in running["jobs"]] == ["running"] + ["planned"] * (len(planned) - 1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out + err
    m = _manifest(folder)
    assert (m["status"], m["exit_code"]) == ("interrupted", code) and m["interruption"].startswith(name)
    steps = {s["name"]: s for s in m["steps"]}
    assert steps["install"]["status"] == "passed"  # finished before: kept as is
    bench = steps["bench-matmul_k128_m128_n512_fp32"]
    assert bench["status"] == "interrupted" and bench["exit_code"] == 143  # SIGTERM to its group
    assert [j["status"] for j in m["jobs"]] == ["interrupted"] + ["not started"] * (len(planned) - 1)
    assert (folder / "INTERRUPTED").exists() and (folder / steps["install"]["log"]).exists()
    summary = (folder / "SUMMARY.md").read_text()
    assert f"interrupted by {name}" in summary and f"(exit code {code})" in summary
    assert "exit None" not in summary and "stopped by the run, exit 143" in summary
    assert f"{len(planned) - 1} job(s) never started" in summary
    for c in planned[1:]:
        assert f"{c.kernel} {c.name} (core 0)" in summary
    pid = int(next(line for line in fake_log(fake) if line.startswith("nki.benchmark")).rsplit("pid=", 1)[1])
    time.sleep(0.2)
    status = pathlib.Path(f"/proc/{pid}/status")
    assert not status.parent.exists() or "zombie" in status.read_text().lower(), (
        "the benchmark process outlived the interrupted run"
    )


def test_under_nohup_a_hangup_does_not_stop_the_run(fake):
    env = dict(fake["env"], FAKE_NKI_BENCH_SECONDS="3")
    argv = [
        "bash",
        str(SCRIPT),
        "--results-dir",
        str(fake["results"]),
        "--venv",
        fake["venv"],
        "--kernels",
        "matmul",
        "--skip-tests",
        "--skip-install",
        "--no-estimate",
        "--iters",
        "2",
    ]
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )  # what nohup does
    try:
        deadline = time.time() + 30
        while not any(line.startswith("nki.benchmark") for line in fake_log(fake)):
            assert proc.poll() is None and time.time() < deadline, "benchmark step never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert _manifest(run_folders(fake)[0])["status"] == "completed"


def test_a_step_over_its_time_limit_is_stopped_and_the_run_goes_on(fake):
    env = dict(fake["env"], FAKE_NKI_BENCH_SECONDS="60")
    proc = run(
        fake, "--kernels", "matmul,conv2d", "--skip-tests", "--skip-install", "--no-estimate", "--timeout", "2", env=env
    )
    assert proc.returncode == 20, proc.stdout + proc.stderr
    m = _manifest(run_folders(fake)[0])
    bench = [s for s in m["steps"] if s["name"].startswith("bench-")]
    assert len(bench) == 3 and {(s["status"], s["exit_code"]) for s in bench} == {("timeout", 124)}
    assert all(s["seconds"] < 30 for s in bench)
    assert [j["status"] for j in m["jobs"]] == ["failed"] * 3
    assert "timeout (its time limit, exit 124)" in (run_folders(fake)[0] / "SUMMARY.md").read_text()


# ------------------------------------------------------------------------- Ctrl-C: no orphan
def test_session_scan_sees_a_live_child():
    """The orphan check below must be able to fail: it finds a process of a given session."""
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        # the child shows as `sleep` once it has exec'd: a loaded machine may take a moment (a flake seen here)
        end = time.monotonic() + 10
        while not any(line.startswith(f"{proc.pid} sleep") for line in session_processes(proc.pid)):
            assert time.monotonic() < end, session_processes(proc.pid)
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert session_processes(proc.pid) == []


def _start(fake, *args, env=None):
    """run_hw.sh in a session of its own, so the test can signal its whole process group."""
    argv = ["bash", str(SCRIPT), "--results-dir", str(fake["results"]), "--venv", fake["venv"], *args]
    return subprocess.Popen(
        argv,
        env=env or fake["env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )


def _wait_for_benchmarks(fake, proc, n, timeout=60):
    deadline = time.time() + timeout
    while sum(line.startswith("nki.benchmark") for line in fake_log(fake)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "benchmark steps never started"
        time.sleep(0.1)


def _snapshot(folder):
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("variant", ["plain", "ignores_sigterm_and_has_a_child"])
def test_ctrl_c_to_the_process_group_stops_every_job(fake, variant):
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group."""
    env = dict(fake["env"], FAKE_NKI_BENCH_SECONDS="120", NKI_HW_STOP_GRACE="2")
    if variant != "plain":
        env.update(FAKE_NKI_BENCH_IGNORE_TERM="1", FAKE_NKI_BENCH_CHILD="1")
    proc = _start(fake, "--kernels", "matmul,conv2d", "--skip-tests", "--no-estimate", "--cores", "2", env=env)
    try:
        _wait_for_benchmarks(fake, proc, 2)
        time.sleep(0.3)
        t0 = time.time()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        stopped_in = time.time() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    assert stopped_in < 30, f"stopping took {stopped_in:.0f} s"
    time.sleep(0.3)
    assert session_processes(proc.pid) == [], "processes outlived the interrupted run"
    (folder,) = run_folders(fake)
    m = _manifest(folder)
    assert (m["status"], m["exit_code"]) == ("interrupted", 130)
    bench = [s for s in m["steps"] if s["name"].startswith("bench-")]
    assert len(bench) == 2 and {s["status"] for s in bench} == {"interrupted"}
    assert {s["core"] for s in bench} == {"0", "1"}
    assert (folder / "INTERRUPTED").exists() and "Traceback" not in err
    before = _snapshot(folder)
    time.sleep(1.5)
    assert _snapshot(folder) == before, "something wrote into the folder after it was marked interrupted"
    # The next run finds the cores free again (fake neuron-ls shows no process) and runs.
    again = run(fake, "--kernels", "matmul", "--skip-tests", "--no-estimate", "--skip-install", "--iters", "2")
    assert again.returncode == 0, again.stdout + again.stderr


def _assert_no_tmp_files(folder):
    stray = [str(p) for p in folder.rglob("*") if p.name.endswith(".tmp")]
    assert stray == [], stray


@pytest.mark.parametrize(
    "full, finalised",
    [
        ("step-end", True),  # a worker's write fails; the main process can still finalise
        ("step-start", True),  # the first write is the main process's (the install step)
        ("step-end,finish", False),  # even the manifest cannot be finalised: said so
    ],
)
def test_disk_full_is_one_clear_line_and_a_failed_manifest(fake, full, finalised):
    env = dict(fake["env"], FAKE_ENOSPC_ON=full)
    proc = run(fake, "--kernels", "matmul,conv2d", "--skip-tests", "--no-estimate", "--cores", "2", env=env)
    assert proc.returncode == 17, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "installing" not in proc.stderr and "--skip-install" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "cannot write results" in line]
    assert len(lines) == 1, proc.stderr
    assert "No space left on device" in lines[0]
    (folder,) = run_folders(fake)
    _assert_no_tmp_files(folder)
    m = _manifest(folder)
    if finalised:
        assert "manifest.json marked failed" in lines[0]
        assert (m["status"], m["exit_code"]) == ("failed", 17)
        assert "No space left on device" in m["failure_reason"]
        assert "No space left on device" in (folder / "SUMMARY.md").read_text()
        assert "running" not in {s["status"] for s in m["steps"]}
    else:
        assert "could not be finalised either" in lines[0] and str(folder) in lines[0]
        assert not (folder / "SUMMARY.md").exists()
        assert "SUMMARY.md" not in proc.stdout
    assert not any("nki.benchmark" in line for line in fake_log(fake)[2:]), "the run went on after the fault"


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip(reason="mounting a small tmpfs needs root; the ENOSPC fake covers the logic")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(reason=f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_really_full_disk_mid_run(fake, small_tmpfs):
    fake["results"] = small_tmpfs / "results"
    env = dict(fake["env"], FAKE_NKI_BENCH_SECONDS="2")
    proc = _start(fake, "--kernels", "matmul", "--skip-tests", "--no-estimate", env=env)
    try:
        _wait_for_benchmarks(fake, proc, 1)
        with open(small_tmpfs / "filler", "wb") as f:  # fill the disk while the benchmark runs
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 17, out + err
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if "cannot write results" in line]
    assert len(lines) == 1 and "No space left on device" in lines[0], err
    assert "could not be finalised either" in lines[0] or "marked failed" in lines[0]
    (folder,) = run_folders(fake)
    _assert_no_tmp_files(folder)
    assert session_processes(proc.pid) == []


CONSTRUCTS = """
def test_tensor_copy_construct():
    pass


def test_dma_transpose_3d_construct():
    raise AssertionError("dma_transpose 3-D SBUF->SBUF: compiler error NCC_EXAMPLE")
"""


def test_construct_smoke_test_runs_first_and_stops_the_run_naming_the_construct(fake):
    test_file = fake["tmp"] / "test_constructs.py"
    test_file.write_text(CONSTRUCTS)
    env = dict(fake["env"], NKI_HW_CONSTRUCTS_TEST=str(test_file))
    proc = run(fake, "--kernels", "matmul", "--no-estimate", env=env)
    assert proc.returncode == 19, proc.stdout + proc.stderr
    assert "construct smoke test failed; nothing was benchmarked" in proc.stderr
    assert "test_dma_transpose_3d_construct: AssertionError: dma_transpose 3-D SBUF->SBUF" in proc.stderr
    assert "test_tensor_copy_construct" not in proc.stderr
    (folder,) = run_folders(fake)
    m = _manifest(folder)
    assert (m["status"], m["exit_code"]) == ("failed", 19)
    assert "test_dma_transpose_3d_construct" in m["failure_reason"]
    assert [s["name"] for s in m["steps"]] == ["install", "constructs"]
    assert not any(line.startswith("nki.benchmark") for line in fake_log(fake))


def test_construct_smoke_test_that_passes_lets_the_run_go_on(fake):
    test_file = fake["tmp"] / "test_constructs.py"
    test_file.write_text("def test_ok():\n    pass\n")
    env = dict(fake["env"], NKI_HW_CONSTRUCTS_TEST=str(test_file))
    proc = run(fake, "--kernels", "matmul", "--no-estimate", "--skip-install", "--iters", "2", env=env)
    assert "construct smoke test passed" in proc.stdout, proc.stdout + proc.stderr
    names = [s["name"] for s in _manifest(run_folders(fake)[0])["steps"]]
    assert names[0] == "constructs" and any(n.startswith("bench-") for n in names)


def test_own_kernel_flow_estimates_on_the_interpreter(fake):
    """The own-kernel route through run_hw.sh: NKI_HW_KERNEL_CONV2D=<a CS149-style conv2d.py> with a
    (fake) real SDK importable; the estimate step must run the user's kernel on the interpreter."""
    data = ROOT / "simulator_tests" / "data" / "cs149_like"
    env = dict(
        fake["env"],
        NKI_HW_KERNEL_CONV2D="conv2d_correct:fused_conv2d_maxpool",
        PYTHONPATH=f"{FAKES / 'sdk'}{os.pathsep}{data}",
    )
    proc = run(fake, "--kernels", "conv2d", "--skip-tests", "--skip-install", "--iters", "2", env=env)
    folder = run_folders(fake)[-1]
    steps = {s["name"]: s for s in _manifest(folder)["steps"]}
    for case in registry.select("conv2d", "quick", bench=True):
        stem = job.stem(case)
        assert steps[f"estimate-{stem}"]["status"] == "passed", (folder / steps[f"estimate-{stem}"]["log"]).read_text()
        est = json.loads((folder / "conv2d" / case.name / f"{stem}.estimate.json").read_text())
        assert est["kernel_impl"] == "conv2d_correct:fused_conv2d_maxpool"
        assert est["executed_by"].startswith("nki_kernels.sim") and est["latency_us"] > 0
    # The bench step fails: the fake SDK has no neuronxcc.nki.language for the project's kernel.
    assert proc.returncode == 20, proc.stdout + proc.stderr
    assert {s["status"] for n, s in steps.items() if n.startswith("bench-")} == {"failed"}


def test_construct_smoke_test_that_cannot_run_says_why(fake):
    test_file = fake["tmp"] / "test_constructs.py"
    test_file.write_text("raise RuntimeError('NKI_HW_REQUIRE=1 but no Neuron device here')\n")
    env = dict(fake["env"], NKI_HW_CONSTRUCTS_TEST=str(test_file))
    proc = run(fake, "--kernels", "matmul", "--no-estimate", "--skip-install", env=env)
    assert proc.returncode == 19, proc.stdout + proc.stderr
    assert "collection failure: RuntimeError: NKI_HW_REQUIRE=1 but no Neuron device here" in proc.stderr


# ------------------------------------------------------------------------- closed pipes, leftovers
def test_stdout_closed_before_the_run_starts_stops_it_without_a_folder(fake):
    read, write = os.pipe()
    os.close(read)
    argv = ["bash", str(SCRIPT), "--results-dir", str(fake["results"]), "--venv", fake["venv"], "--kernels", "matmul"]
    proc = subprocess.Popen(
        argv, env=fake["env"], stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    )
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert "stopped by SIGPIPE (its standard output was closed) before the run started" in err
    assert "Traceback" not in err and run_folders(fake) == []
    assert session_processes(proc.pid) == []


def test_stdout_closed_mid_run_stops_every_step_and_marks_the_folder(fake):
    """`run_hw.sh | head -3`: the reader goes away while a benchmark runs; the next progress line meets the
    closed pipe and the run stops as for a signal (SIGPIPE), its manifest consistent."""
    env = dict(fake["env"], FAKE_NKI_BENCH_SECONDS="60", NKI_HW_STOP_GRACE="2")
    proc = _start(fake, "--kernels", "matmul,conv2d", "--skip-tests", "--no-estimate", "--cores", "2", env=env)
    try:
        assert proc.stdout is not None
        while "results folder" not in proc.stdout.readline():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.stdout.close()  # the reader is gone; the first job's progress line will find out
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 141, err
    assert "Traceback" not in err
    (folder,) = run_folders(fake)
    m = _manifest(folder)
    assert (m["status"], m["exit_code"]) == ("interrupted", 141) and m["interruption"].startswith("SIGPIPE")
    assert (folder / "INTERRUPTED").exists()
    time.sleep(0.3)
    assert session_processes(proc.pid) == []


def test_what_a_step_leaves_running_is_stopped_when_it_ends(fake):
    """The fake benchmark starts a `sleep` child (as a runtime helper might) and exits normally: the child
    was left with PPID 1.  The step's process group is the job's to clean."""
    env = dict(fake["env"], FAKE_NKI_BENCH_CHILD="1")
    proc = _start(
        fake, "--kernels", "matmul", "--skip-tests", "--skip-install", "--no-estimate", "--iters", "2", env=env
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    child = int(next(line for line in fake_log(fake) if "child=" in line).split("child=")[1].split()[0])
    assert not pathlib.Path(f"/proc/{child}").exists() or "zombie" in pathlib.Path(f"/proc/{child}/status").read_text()
    assert session_processes(proc.pid) == []
    (folder,) = run_folders(fake)
    bench = next(s for s in _manifest(folder)["steps"] if s["name"].startswith("bench-"))
    assert "stopped the processes this step left running" in (folder / bench["log"]).read_text()
