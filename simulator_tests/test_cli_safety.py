"""Every entry point under signals, closed pipes, bad numbers and bad kernels.

Signals and pipes are tested on real child processes, each in a session of its own so that what it
leaves behind can be counted; bad input and bad kernels in this process where nothing else is at
stake.  The hardware job's own cases are in test_hw_run_script.py, dev.py's in test_dev_py.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_testing import assert_usage_error, proc_available, run_main, session_processes, wait_for_session_to_end

from nki_kernels import cli, commands, lifecycle

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "nki_kernels.cli"]
SCRIPT = ROOT / "scripts" / "run_hw.sh"
DEV = ROOT / "dev.py"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes")

_KERNELS = {
    "mine.py": """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out
""",
    # a runaway kernel: instructions in a `while True` loop
    "forever.py": """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def spin(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    while True:
        t = nl.add(t, 1.0)
    nl.store(out, t)
    return out


@nki.jit
def steps(a, n=10):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for _ in nl.static_range(n):
        t = nl.add(t, 1.0)
    nl.store(out, t)
    return out
""",
    # the kernel raises (the user's own bug, two frames deep)
    "raises.py": """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def helper(x):
    return x / 0


@nki.jit
def boom(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    helper(1)
    return out
""",
    "syn.py": "import neuronxcc.nki as nki\ndef k(:\n",
    "script_raises.py": "def parse(x):\n    return int(x)\n\n\nparse('not a number')\n",
    "script_sim_error.py": """
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def never_written(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    return out


never_written(np.zeros((4, 4), np.float32))
""",
    "script_forever.py": """
import numpy as np
from forever import spin

spin(np.zeros((128, 64), np.float32))
""",
    # `run` of a long script: the kernel again and again; "started" says it runs
    "loop_run.py": """
import numpy as np
from mine import add

x = np.ones((128, 512), np.float32)
open("started", "w").write("1")
while True:
    add(x, x)
""",
    "chatty.py": "for i in range(200000):\n    print('line', i)\n",
    # a kernel that spends nearly all its time in __del__, where a signal's exception is swallowed
    "swallow.py": """
import time

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


class Slow:
    def __del__(self):
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            pass


@nki.jit
def spin(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for _ in range(1000000):
        Slow()
    nl.store(out, t)
    return out
""",
}


@pytest.fixture
def userdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("NKI_BACKEND", "NKI_SIM_OPTIONS", "NKI_SIMULATOR", "NKI_PROGRESS", "NKI_SIM_FULL_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
    for name, text in _KERNELS.items():
        (tmp_path / name).write_text(text)
    for name, latency in (("nan", "NaN"), ("text", '"abc"'), ("negative", "-5")):  # records roofline cannot plot
        (tmp_path / f"{name}.json").write_text(f'{{"latency_us": {latency}, "flops": 1e9, "hbm_bytes": 1e6}}')
    sdk = tmp_path / "fsdk" / "nki" / "test"  # a fake aws-neuron-sdk checkout for conformance
    sdk.mkdir(parents=True)
    (sdk / "test_fast.py").write_text("import neuronxcc.nki as nki\n\n\ndef test_ok():\n    assert True\n")
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NKI_", "FAKE_"))}
    env.update(NKI_BACKEND="sim", OPENBLAS_NUM_THREADS="1", NKI_PROGRESS="0", **extra)
    return env


def _start(argv: list[str], cwd: Path, **popen: object) -> subprocess.Popen:
    """A command in a session of its own (its pid is the session id), stdout and stderr to files."""
    kw: dict = dict(stdout=open(cwd / "out.txt", "w"), stderr=open(cwd / "err.txt", "w"))  # noqa: SIM115
    kw.update(popen)
    return subprocess.Popen(argv, cwd=cwd, env=_env(), start_new_session=True, **kw)


def _wait_until(condition, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"exited ({proc.returncode}) before {what}"
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.1)


# ------------------------------------------------------------------ 1, 2: signals stop everything, at once
# (argv, when it is busy: a condition on the working folder and the session)
_LONG = {
    "verify": (["verify", "--no-estimate", "--jobs", "2"], "workers"),
    "profile": (["profile", "forever.py:spin", "--shape", "128,512", "--max-instructions", "100000000"], "tracing"),
    "run": (["run", "loop_run.py"], "started"),
}
_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _busy(cwd: Path, proc: subprocess.Popen, mark: str) -> bool:
    if mark == "workers":  # the main process and its two workers, tracing the biggest cases
        return len(session_processes(proc.pid)) >= 3
    if mark == "tracing":
        return "tracing" in (cwd / "err.txt").read_text()
    return (cwd / mark).exists()


@pytest.mark.skipif(not proc_available(), reason="counts processes through /proc")
@pytest.mark.parametrize("sig", _SIGNALS, ids=[s.name for s in _SIGNALS])
@pytest.mark.parametrize("cmd", list(_LONG))
def test_a_signal_stops_the_command_and_every_worker_within_seconds(userdir: Path, cmd: str, sig: signal.Signals):
    argv, mark = _LONG[cmd]
    proc = _start(CLI + argv, userdir)
    try:
        _wait_until(lambda: _busy(userdir, proc, mark), proc, "busy")
        time.sleep(1.5)  # well into the work (verify: both workers in a trace)
        t0 = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C: the terminal signals the whole foreground group
        else:
            proc.send_signal(sig)  # kill -TERM $P: the command alone
        proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    left = wait_for_session_to_end(proc.pid)
    err = (userdir / "err.txt").read_text()
    assert proc.returncode == 128 + sig, err
    assert took < 5, f"stopping took {took:.1f} s"  # about 0.1-0.4 s measured; the suite's machine is shared
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == f"nki-kernels {cmd}: interrupted by {lifecycle.NAMES[sig]}", err
    assert left == [], f"processes outlived the command: {left}"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_swallowed_by_a_del_still_stops_the_command(userdir: Path, sig: signal.Signals):
    """Python can only print a KeyboardInterrupt raised inside __del__ ("Exception ignored") and runs
    on; `profile` of a long kernel then ignored Ctrl-C.  It is delivered again, and if the code keeps
    swallowing it, the command ends with its one line and its code 3 s after the first swallow."""
    proc = _start(CLI + ["profile", "swallow.py:spin", "--shape", "128,64"], userdir)
    try:
        _wait_until(lambda: _busy(userdir, proc, "tracing"), proc, "tracing")
        time.sleep(1.0)
        t0 = time.monotonic()
        os.killpg(proc.pid, sig)
        proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = (userdir / "err.txt").read_text()
    assert proc.returncode == 128 + sig, err
    assert took < 8, f"stopping took {took:.1f} s"  # 3.0 s measured
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.strip().splitlines()[-1] == f"nki-kernels profile: interrupted by {lifecycle.NAMES[sig]}", err


def test_an_allocation_stopped_half_made_is_deleted_quietly():
    """A signal raises in whatever bytecode runs: once inside Alloc.__init__, before `token` was set, its
    __del__ printed "Exception ignored ... 'Alloc' object has no attribute 'token'" after the one line."""
    import gc

    from nki_kernels.sim.core.memory import Alloc

    seen: list = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        half = Alloc.__new__(Alloc)
        del half
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert seen == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_verify_workers_die_with_their_parent_even_on_sigkill(userdir: Path):
    proc = _start(CLI + ["verify", "--no-estimate", "--jobs", "2"], userdir)
    try:
        _wait_until(lambda: len(session_processes(proc.pid)) >= 3, proc, "workers")
        os.kill(proc.pid, signal.SIGKILL)  # no handler runs: only the kernel can stop the workers now
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert wait_for_session_to_end(proc.pid) == []


def test_dev_py_sigterm_reaches_verify_and_its_workers(userdir: Path, monkeypatch: pytest.MonkeyPatch):
    """The issue's own steps: `python3 dev.py verify & kill -TERM $P` orphaned both workers."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dev_for_test", DEV)
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    if not (dev.STAMP.exists() and dev.STAMP.read_text() == dev._want() and dev._python().exists()):
        pytest.skip(reason="needs the venv dev.py made (run the suite with python3 dev.py test)")
    proc = _start([sys.executable, str(DEV), "verify", "--no-estimate", "--jobs", "2"], userdir)
    try:
        _wait_until(lambda: len(session_processes(proc.pid)) >= 4, proc, "workers")  # dev.py, cli, 2 workers
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, (userdir / "err.txt").read_text()
    assert wait_for_session_to_end(proc.pid) == []


# ------------------------------------------------------------------ 7: a closed pipe, records whole
# (argv, when the reader goes away: "start" = before the first write, "line" = after the first line,
#  the records that must be whole afterwards)
_PIPED = {
    "profile": (
        CLI + ["profile", "matmul", "--shape", "256,256,256", "--out", "rec"],
        "start",
        ["rec/matmul_256x256x256_bf16_benchmark_trn2.json", "rec/matmul_256x256x256_bf16_benchmark_trn2.trace.json"],
    ),
    "profile own kernel": (
        CLI + ["profile", "mine.py:add", "--shape", "128,512", "--shape", "128,512", "--out", "rec"],
        "start",
        ["rec/mine_add_128x512+128x512_fp32_benchmark_trn2.json"],
    ),
    "bench": (
        CLI + ["bench", "--only", "conv32x16_fp16", "--out", "rec"],
        "start",
        ["rec/bench_benchmark_trn2_only-conv32x16_fp16.json"],
    ),
    "verify": (CLI + ["verify", "--quick", "--no-estimate", "--jobs", "2"], "line", []),
    "run": (CLI + ["run", "chatty.py"], "line", []),
    "sim-bench": (CLI + ["sim-bench", "--iters", "5"], "start", []),
    "conformance": (CLI + ["conformance", "fsdk", "--json", "rec/c.json"], "start", []),
    "run_hw.sh --dry-run": (["bash", str(SCRIPT), "--dry-run", "--results-dir", "res"], "start", []),
}


@pytest.mark.skipif(not proc_available(), reason="counts processes through /proc")
@pytest.mark.parametrize("name", list(_PIPED))
def test_a_closed_pipe_ends_the_command_quietly_with_its_records_whole(userdir: Path, name: str):
    argv, when, records = _PIPED[name]
    if when == "start":  # the reader is gone before the first byte: `| head -0`, the worst case
        read, write = os.pipe()
        os.close(read)
        proc = _start(argv, userdir, stdout=write)
        os.close(write)
    else:  # the reader takes one line and goes: `| head -1`
        proc = _start(argv, userdir, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline()
        proc.stdout.close()
    try:
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = (userdir / "err.txt").read_text()
    assert proc.returncode == 141, err  # as a process ended by SIGPIPE
    assert "Traceback" not in err and "Exception ignored" not in err and "Error" not in err, err
    for rec in records:
        assert json.loads((userdir / rec).read_text()), rec  # there and whole
    assert not [p.name for p in userdir.rglob("*.tmp*")], "a temporary record was left"
    assert wait_for_session_to_end(proc.pid) == []


# ------------------------------------------------------------------ 4: --hw JSON is checked before any work
_HW = [
    ({"base": "trn2", "constants": {"pe_clock_ghz": -1.4}}, "constant 'pe_clock_ghz': value must be > 0 (GHz)"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": 0}}, "value must be > 0"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": 1e-300}}, "more than 1,000x away from trn2's 2.4"),
    ({"base": "trn2", "constants": {"dma_rings": 1e300}}, "more than 1,000x away"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": float("inf")}}, "value must be finite, got inf"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": float("nan")}}, "value must be finite, got nan"),
    (
        {"base": "trn2", "constants": {"pe_clok_ghz": 2.0}},
        "unknown constant 'pe_clok_ghz'; did you mean 'pe_clock_ghz'?",
    ),
    ({}, 'an empty description; give "base": "trn2"'),
    ({"constants": {"pe_clock_ghz": 2.0}}, "lacks constants: act_clock_ghz"),
    ({"base": "trn9"}, '"base" must be one of trn1, trn2'),
    ({"base": "trn2", "cores": 2}, "unknown key(s) 'cores'"),
    ({"base": "trn2", "constants": {"dma_rings": 2.5}}, "a count (engines) must be a whole number"),
    ({"base": "trn2", "constants": {"pe_throttle_util": 2}}, "a fraction must be in (0, 1]"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": "2.4"}}, "value must be a number, got '2.4'"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": True}}, "value must be a number, got True"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": {"value": 2.0, "tag": "Q"}}}, "'pe_clock_ghz': Const tag"),
    ({"base": "trn2", "constants": {"pe_clock_ghz": {"unit": "GHz"}}}, "'pe_clock_ghz': no \"value\""),
    ({"base": "trn2", "constants": [1, 2]}, '"constants" must be an object'),
]


@pytest.mark.parametrize("desc, message", _HW, ids=[m[:40] for _, m in _HW])
def test_a_bad_hardware_description_is_one_line_before_any_work(
    userdir: Path, capsys: pytest.CaptureFixture[str], desc: dict, message: str
):
    (userdir / "hw.json").write_text(json.dumps(desc))  # NaN / Infinity as Python's json writes them
    code, out, err = run_main(capsys, ["profile", "matmul", "--shape", "256,256,256", "--hw", "hw.json"])
    assert_usage_error(code, out, err, message)
    assert not (userdir / "perf-out").exists()


def test_a_good_hardware_description_still_estimates(userdir: Path, capsys: pytest.CaptureFixture[str]):
    (userdir / "hw.json").write_text(json.dumps({"base": "trn2", "constants": {"pe_clock_ghz": 1.2}}))
    code, out, err = run_main(capsys, ["profile", "matmul", "--shape", "256,256,256", "--hw", "hw.json"])
    assert code == 0, err
    rec = json.loads((userdir / "perf-out" / "matmul_256x256x256_bf16_benchmark_hw-hw.json").read_text())
    assert 0 < rec["mfu"] <= 1


# ------------------------------------------------------------------ 5: the user's exception is the user's
_USER_ERRORS = [
    (["run", "syn.py"], ['File "syn.py", line 2', "def k(:", "SyntaxError: invalid syntax"]),
    (
        ["run", "script_raises.py"],
        ['script_raises.py", line 5, in <module>', "in parse", "ValueError: invalid literal"],
    ),
    (["run", "script_sim_error.py"], ['script_sim_error.py", line 13, in <module>', "[E016] return(out)"]),
    (
        ["profile", "raises.py:boom", "--shape", "4,4"],
        ['raises.py", line 13, in boom', "in helper", "ZeroDivisionError"],
    ),
]


@pytest.mark.parametrize("argv, shown", _USER_ERRORS, ids=[" ".join(a) for a, _ in _USER_ERRORS])
def test_the_users_exception_shows_the_users_frames_only(
    userdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], shown: list[str]
):
    code, _, err = run_main(capsys, argv)
    assert code == 1, err
    for text in shown:
        assert text in err, err
    frames = [ln for ln in err.splitlines() if ln.startswith('  File "')]
    ours = [ln for ln in frames if os.sep + "nki_kernels" + os.sep in ln or "runpy" in ln]
    assert ours == [], err


def test_full_traceback_shows_every_frame_on_request(
    userdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("NKI_SIM_FULL_TRACEBACK", "1")
    code, _, err = run_main(capsys, ["run", "script_raises.py"])
    assert code == 1 and f"nki_kernels{os.sep}commands.py" in err and "runpy" in err


def test_a_bug_of_ours_is_one_line_saying_so(
    userdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    def broken(args):
        raise KeyError("internal")

    monkeypatch.setattr(commands, "cmd_sim_bench", broken)
    code, _, err = run_main(capsys, ["sim-bench"])
    assert code == 1 and err.count("\n") == 1, err
    assert "nki-kernels sim-bench: internal error: KeyError: 'internal' (a bug of nki-kernels" in err


# ------------------------------------------------------------------ 6: a runaway kernel stops with E031
@pytest.mark.parametrize(
    "argv, env",
    [
        (["profile", "forever.py:spin", "--shape", "128,64", "--max-instructions", "2000"], {}),
        (["profile", "forever.py:spin", "--shape", "128,64"], {"NKI_SIM_OPTIONS": "max_instructions=2000"}),
        (["run", "--max-instructions", "2000", "script_forever.py"], {}),
        (["run", "script_forever.py"], {"NKI_SIM_OPTIONS": "max_instructions=2000"}),
    ],
    ids=["profile flag", "profile env", "run flag", "run env"],
)
def test_a_runaway_kernel_stops_at_the_instruction_cap(
    userdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict
):
    from nki_kernels.sim.core import options

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(options, "_default", None)  # read NKI_SIM_OPTIONS again, as a new process does
    t0 = time.monotonic()
    code, _, err = run_main(capsys, argv)
    assert code == 1, err
    assert "[E031] nl.add: the run executed more than 2,000 instructions (SimOptions.max_instructions)" in err
    assert "got 2001, limit 2000" in err and "--max-instructions 20000" in err and "forever.py:11" in err
    assert time.monotonic() - t0 < 60


def test_the_cap_counts_exactly_and_is_off_the_default_path(userdir: Path):
    import numpy as np

    from nki_kernels.sim import SimOptions, install_neuronxcc_alias, trace_kernel
    from nki_kernels.sim.core.errors import CODES, SimRuntimeError

    assert SimOptions().max_instructions == 4_000_000 and CODES["E031"][0] is SimRuntimeError
    with install_neuronxcc_alias():
        sys.path.insert(0, str(userdir))
        try:
            import forever
        finally:
            sys.path.remove(str(userdir))
        x = np.ones((128, 64), np.float32)
        out, trace = trace_kernel(forever.steps, x, n=10, options=SimOptions(max_instructions=12))  # load+10+store
        assert len(trace.events) == 12 and np.all(np.asarray(out) == 11)
        with pytest.raises(SimRuntimeError, match=r"\[E031\].*got 12, limit 11"):
            trace_kernel(forever.steps, x, n=10, options=SimOptions(max_instructions=11))
        sys.modules.pop("forever", None)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_instructions"):
            SimOptions(max_instructions=bad)


# ------------------------------------------------------------------ 9, 10: bad numbers, empty values, no file


_BAD = [
    (["verify", "--jobs", "99999999999"], {}, "argument --jobs: must be <= 64, got 99,999,999,999"),
    (["verify", "--jobs", "0"], {}, "argument --jobs: must be >= 1"),
    (["sim-bench", "--iters", "999999999999"], {}, "argument --iters: must be <= 100,000"),
    (["bench", "--only", ""], {}, "--only '': an empty value selects nothing"),
    (["bench", "--only", "  "], {}, "--only '  ': an empty value selects nothing"),
    (["roofline", "--only", ""], {}, "--only '': an empty value selects nothing"),
    (["conformance", "fsdk", "--json", ""], {}, "--json: empty file name"),
    (["conformance", "fsdk", "-k", ""], {}, "-k '': an empty SUBSTRING selects nothing"),
    (["conformance", "fsdk", "--jobs", "100000"], {}, "argument --jobs: must be <= 64"),
    (["conformance", "fsdk", "--timeout", "1e300"], {}, "argument --timeout: must be <= 86400"),
    (["profile", "matmul", "--top", "99999999999"], {}, "argument --top: must be <= 1,000"),
    (["profile", "conv", "--pool", "99999999999999"], {}, "pool_size): got 99999999999999; allowed: an int in 1..4"),
    (["profile", "forever.py:spin", "--shape", "4", "--max-instructions", "0"], {}, "--max-instructions: must be >= 1"),
    (["run", "mine.py"], {"NKI_SIM_OPTIONS": "shuffle_affine_seed=-1"}, "shuffle_affine_seed must be an integer >= 0"),
    (["run", "mine.py"], {"NKI_SIM_OPTIONS": "poison=0,poison=1"}, "option 'poison' given twice"),
    (["run", "mine.py"], {"NKI_SIM_OPTIONS": "max_instructions=0"}, "max_instructions must be an integer >= 1"),
    (["conformance", "--nki-library", "fsdk", "--library-python", ""], {}, "--library-python '' is not an executable"),
    (["conformance", "--nki-library", "fsdk"], {}, "no test_*.py under fsdk/test/integration"),
    (["profile", "matmul", "--out", ""], {}, "--out: empty directory name"),
    (["run", "/dev/null"], {}, "'/dev/null' is not a regular file"),
    *(
        (["roofline", "--from", f"{n}.json", "-o", "r.png"], {}, "no estimate with a finite latency_us > 0")
        for n in ("nan", "text", "negative")
    ),
    (["run"], {}, "the following arguments are required: file;"),
]


@pytest.mark.parametrize("argv, env, message", _BAD, ids=[" ".join(a) + "".join(e.values()) for a, e, _ in _BAD])
def test_huge_or_empty_values_are_one_line_before_any_work(
    userdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict,
    message: str,
):
    if argv[-1] == "/dev/null" and not os.path.exists("/dev/null"):
        pytest.skip(reason="no /dev/null")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert_usage_error(*run_main(capsys, argv), message)
    assert not (userdir / "perf-out").exists() and not list(userdir.glob("bench_*"))


def test_verify_says_when_it_uses_fewer_workers_than_asked(capsys: pytest.CaptureFixture[str], monkeypatch):
    small = commands._verify_groups(True)[:2]
    monkeypatch.setattr(commands, "_verify_groups", lambda quick: small)
    assert cli.main(["verify", "--quick", "--no-estimate", "--jobs", "5"]) == 0
    assert "2 worker processes (--jobs 5: one per case at most)" in capsys.readouterr().out


# ------------------------------------------------------------------ 12: profile's dtype is said, float32 for yours
@pytest.mark.parametrize(
    "argv, dtype, stem, why",
    [
        (["mine.py:add", "--shape", "128,512", "--shape", "128,512"], "float32", "fp32", "the default for your own"),
        (
            ["mine.py:add", "--shape", "128,512", "--shape", "128,512", "--dtype", "bfloat16"],
            "bfloat16",
            "bf16",
            "--dtype",
        ),
        (["matmul", "--shape", "128,128,128"], "bfloat16", "bf16", "this kernel's default"),
    ],
)
def test_profile_prints_the_input_dtype_and_defaults_to_float32_for_your_kernel(
    userdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], dtype: str, stem: str, why: str
):
    code, out, err = run_main(capsys, ["profile", *argv])
    assert code == 0, err
    head = out.splitlines()[0]
    assert f", {dtype} ({why}" in head and "--dtype float32|bfloat16|float16 changes it" in head, head
    assert [p.name for p in (userdir / "perf-out").glob(f"*_{stem}_benchmark_trn2.json")], out


# ------------------------------------------------------------------ 14: --help is plain text
@pytest.mark.parametrize("cmd", [[], ["verify"], ["run"], ["conformance"], ["sim-bench"], ["profile"], ["bench"]])
def test_help_has_no_rest_markup(capsys: pytest.CaptureFixture[str], cmd: list[str]):
    import re

    code, out, _ = run_main(capsys, [*cmd, "--help"])
    assert code == 0 and out.startswith("usage: nki-kernels")
    assert "``" not in out and not re.search(r":[a-z]+:`", out), out


def test_e099_names_the_flag_for_benchmark_and_baremetal_only():
    """README: without --estimate-benchmark, nki.benchmark raises E099 "and says which flag to add"."""
    from nki_kernels.sim.core.errors import needs_device

    for api in ("nki.benchmark", "nki.baremetal"):
        assert "nki-kernels run --estimate-benchmark FILE" in str(needs_device(api))
    assert "--estimate-benchmark" not in str(needs_device("nki.profile"))  # the flag does not help there
