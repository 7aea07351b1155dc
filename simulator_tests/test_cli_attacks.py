"""Every bad input a user can type is one line on stderr, exit code 2, before any work.

The first table is the list a new user hit (a fresh clone, the README only); the second is more of
the same kind.  "Before any work" is checked as: no "tracing ..." line (nothing ran on the
interpreter) and no output written where the command would write it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cli_testing import assert_usage_error, run_main

_USER_KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


def plain(a):
    return a
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder: a hardware file holding a list, a directory, a kernel file, a broken file."""
    monkeypatch.chdir(tmp_path)
    for name in ("NKI_BACKEND", "NKI_SIM_OPTIONS", "NKI_SIMULATOR", "NKI_PROGRESS", "NKI_SIM_FULL_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "a_directory").mkdir()
    (tmp_path / "mine.py").write_text(_USER_KERNEL)
    (tmp_path / "broken.py").write_text("import neuronxcc.nki as nki\ndef k(:\n")
    (tmp_path / "raises.py").write_text("import neuronxcc.nki as nki\nimport torch_that_is_not_installed\n")
    (tmp_path / "notjson.json").write_text("{not json")
    return tmp_path


# (argv, environment, message): the list from the report of a new user's first hour
REPORTED = [
    (["sim-bench", "--iters", "-5"], {}, "argument --iters: must be >= 1, got -5"),
    (
        ["profile", "conv", "--shape", "1,256,256,100000,100000,3"],
        {},
        "conv b1_ci256_co256_h100000_w100000_k3_p1_fp16: inputs and output need 9,536.6 GiB of HBM; "
        "one trn2 device has 96 GiB",
    ),
    (["profile", "matmul", "--shape", "1000000,1000000,1000000"], {}, "GiB of HBM; one trn2 device has 96 GiB"),
    (["profile", "matmul", "--hw", "list.json"], {}, "--hw 'list.json': expected a JSON object"),
    (["profile", "matmul", "--shape", "128,128,128", "--out", "/proc/x"], {}, "--out '/proc/x': cannot create"),
    (["bench", "--only", "conv32x16_fp16", "--out", "/proc/x"], {}, "--out '/proc/x': cannot create"),
    (["roofline", "--from", "list.json", "-o", "/proc/x.png"], {}, "-o '/proc/x.png'"),
    (["profile", "os:getcwd", "--shape", "4"], {}, "'os:getcwd' is not an NKI kernel (a builtin_function_or_method)"),
    (["profile", "matmul", "--shape", "-1,2,3"], {}, "--shape '-1,2,3': every value must be >= 1"),
    (["profile", "conv", "--shape", "-1,2,3,4,5,6"], {}, "every value must be >= 1"),
    (["profile", "matmul", "--hw", "/missing.json"], {}, "--hw '/missing.json': no such file"),
    (["run", "a_directory"], {}, "'a_directory' is a directory; give the Python file to run"),
    (["run", "mine.py"], {"NKI_BACKEND": "bogus"}, "NKI_BACKEND='bogus': allowed values are auto, sim, neuron"),
    (["verify"], {"NKI_BACKEND": "bogus"}, "NKI_BACKEND='bogus': allowed values are auto, sim, neuron"),
    (["profile", "matmul"], {"NKI_BACKEND": "bogus"}, "NKI_BACKEND='bogus'"),
    (["verify"], {"NKI_SIM_OPTIONS": "garbage"}, "NKI_SIM_OPTIONS='garbage': unknown option 'garbage'"),
    (["profile", "matmul"], {"NKI_SIM_OPTIONS": "garbage"}, "NKI_SIM_OPTIONS='garbage': unknown option"),
    (["run", "mine.py"], {"NKI_SIM_OPTIONS": "poison=maybe"}, "poison='maybe' is not a boolean"),
    (["run", "mine.py"], {"NKI_BACKEND": "neuron"}, "NKI_BACKEND='neuron' asks for the real Neuron SDK"),
]


@pytest.mark.parametrize("argv, env, message", REPORTED, ids=[" ".join(a) + "".join(e) for a, e, _ in REPORTED])
def test_reported_bad_inputs(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    if "/proc/" in " ".join(argv) and not os.path.isdir("/proc"):
        pytest.skip(reason="/proc exists on Linux only")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert_usage_error(*run_main(capsys, argv), message)
    assert not (workdir / "perf-out").exists()


@pytest.mark.parametrize("argv", [["verify"], ["profile", "matmul"], ["run", "mine.py"]])
def test_a_bad_backend_is_a_usage_error_in_a_fresh_process(workdir: Path, argv: list[str]) -> None:
    """The table above runs in this process, where nki_kernels.backend was imported long ago; a fresh
    one shows that nothing reads NKI_BACKEND at import before the environment is checked."""
    import subprocess

    env = dict(os.environ, NKI_BACKEND="bogus")
    proc = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", *argv], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "NKI_BACKEND='bogus': allowed values are auto, sim, neuron" in proc.stderr


MORE = [
    (["profile"], "the following arguments are required: kernel"),
    (["profile", "nosuch"], "unknown kernel 'nosuch'; allowed: conv, matmul, attention"),
    (["profile", "matmul", "--shape", ""], "--shape '': expected comma-separated positive integers"),
    (["profile", "matmul", "--shape", "1,,2"], "expected comma-separated positive integers"),
    (["profile", "matmul", "--shape", "1,2,3", "--shape", "4,5,6"], "--shape given 2 times; matmul takes one"),
    (["profile", "matmul", "--top", "abc"], "argument --top: expected an integer >= 0, got 'abc'"),
    (["profile", "conv", "--pool", "-1"], "argument --pool: must be >= 1, got -1"),
    (["profile", "matmul", "--dtype", "int8"], "argument --dtype: invalid choice: 'int8'"),
    (["profile", "matmul", "--hw", "notjson.json"], "--hw 'notjson.json': not a JSON hardware description"),
    (["profile", "matmul", "--hw", "a_directory/"], "--hw 'a_directory/' is not a file"),
    (["profile", "nosuchfile.py:k", "--shape", "4"], "no such file 'nosuchfile.py'"),
    (["profile", "a_directory/x.py:k", "--shape", "4"], "no such file"),
    (["profile", "mine.py:plain", "--shape", "4"], "is not an NKI kernel (a plain Python function"),
    (["profile", "mine.py:nope", "--shape", "4"], "mine.py has no 'nope'; its NKI kernels: add"),
    (["profile", "mine.py:add", "--shape", "128,512"], "takes 2 array argument(s) (a, b); give one --shape per"),
    (["profile", "mine.py:add"], "--shape is required"),
    (["profile", "mine.py:"], "unknown kernel 'mine.py:'"),
    (["profile", "broken.py:k", "--shape", "4"], "broken.py: not valid Python"),
    (["profile", "raises.py:k", "--shape", "4"], "importing raises.py failed: ModuleNotFoundError"),
    (["profile", "nosuch_module:fn", "--shape", "4"], "no module named 'nosuch_module'"),
    (["profile", "mine.py:add", "--shape", "128,512", "--shape", "128,512", "--out", "mine.py"], "not a directory"),
    (["bench", "--only"], "argument --only: expected at least one argument"),
    (["roofline", "--from", "a_directory"], "--from 'a_directory' is a directory"),
    (["roofline", "--from", "notjson.json"], "not a JSON record"),
    (["roofline", "-o", "plot.gif", "--from", "list.json"], "the suffix '.gif' is not an image format"),
    (["roofline", "-o", "a_directory", "--from", "list.json"], "-o 'a_directory' is a directory"),
    (["run"], "the following arguments are required: file"),
    (["run", "nosuch.py"], "no such file: nosuch.py"),
    (["run", "--shuffle", "-3", "mine.py"], "argument --shuffle: must be >= 0, got -3"),
    (["sim-bench", "--iters", "0"], "argument --iters: must be >= 1, got 0"),
    (["sim-bench", "--iters", "1e3"], "argument --iters: expected an integer >= 1, got '1e3'"),
    (["verify", "--bogus"], "unrecognized arguments: --bogus"),
    (["conformance"], "missing PATH"),
    (["conformance", "/nonexistent/sdk"], "is not a directory"),
    (["nosuch"], "invalid choice: 'nosuch'"),
]


@pytest.mark.parametrize("argv, message", MORE, ids=[" ".join(a) for a, _ in MORE])
def test_more_bad_inputs(workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert_usage_error(*run_main(capsys, argv), message)


@pytest.mark.parametrize(
    "var, value, message",
    [
        ("NKI_SIMULATOR", "2", "NKI_SIMULATOR='2': allowed: 1, true, yes, on or 0, false, no, off"),
        ("NKI_PROGRESS", "maybe", "NKI_PROGRESS='maybe': allowed values are auto, 1"),
        ("NKI_SIM_FULL_TRACEBACK", "please", "NKI_SIM_FULL_TRACEBACK='please'"),
        ("NKI_SIM_OPTIONS", "posion=1", "unknown option 'posion'"),
    ],
)
@pytest.mark.parametrize("argv", [["verify"], ["sim-bench"], ["run", "mine.py"], ["profile", "matmul"], ["bench"]])
def test_every_subcommand_checks_the_environment_first(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    var: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(var, value)
    assert_usage_error(*run_main(capsys, argv), message)


@pytest.mark.parametrize("cmd", ["verify", "run", "sim-bench", "profile", "bench", "roofline", "conformance"])
def test_help_of_every_subcommand_works(capsys: pytest.CaptureFixture[str], cmd: str) -> None:
    code, out, _ = run_main(capsys, [cmd, "--help"])
    assert code == 0 and f"usage: nki-kernels {cmd}" in out


def test_no_arguments_is_a_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, [])
    assert code == 2 and "the following arguments are required: cmd" in err and err.count("\n") == 1


def test_run_passes_dash_values_to_the_file_unchanged(workdir: Path) -> None:
    """Only arguments before the file are nki-kernels' own: `--x -1` after it reach the script as written."""
    import subprocess

    (workdir / "echo.py").write_text("import sys\nprint(sys.argv[1:])\n")
    proc = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", "echo.py", "--x", "-1", "--shape", "-2,3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['--x', '-1', '--shape', '-2,3']"


def test_roofline_from_a_profile_record_labels_the_point_by_its_file(workdir: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
    from nki_kernels.perf import cli as pcli

    rec = {"label": "estimate (cost model)", "kernel": "matmul", "latency_us": 10.0, "flops": 2e9, "hbm_bytes": 1e6}
    path = workdir / "matmul_256x256x256_bf16_benchmark_trn2.json"
    path.write_text(json.dumps(rec))
    (pt,) = pcli._points_of_record(rec, str(path))
    assert pt["label"] == "matmul_256x256x256_bf16_benchmark_trn2"


def test_roofline_o_without_a_suffix_prints_the_file_it_wrote(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
    rec = {"rows": [{"key": "k1", "estimate": {"latency_us": 10.0, "flops": 2e9, "hbm_bytes": 1e6}}]}
    (workdir / "bench.json").write_text(json.dumps(rec))
    code, out, err = run_main(capsys, ["roofline", "--from", "bench.json", "-o", "myplot"])
    assert code == 0, err
    assert out.strip().endswith(": myplot.png") and (workdir / "myplot.png").read_bytes()[:4] == b"\x89PNG"
    assert not (workdir / "myplot").exists()
