"""SDK detection and the NKI 0.7 (SDK >= 2.33) hardware path, against fake SDK trees, a fake
``neuron-explorer`` and NumPy stand-in kernels (scripts/fakes).  No Trainium, no SDK."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from nki_kernels.hw import job, nki07_path, sdk
from nki_kernels.kernels import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "run_hw.sh"
FAKES = ROOT / "scripts" / "fakes"
SDK_PY = ROOT / "nki_kernels" / "hw" / "sdk.py"
MATMUL = registry.get_case("matmul", "k128_m128_n512_fp32")


def _clean_env(**extra):
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NKI_HW_", "FAKE_", "NEURON_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    base.update(extra)
    return base


def sdk_path(*pythonpath):
    """``sdk.py path`` in a fresh interpreter with the given trees on PYTHONPATH."""
    env = _clean_env(PYTHONPATH=os.pathsep.join(map(str, pythonpath)))
    proc = subprocess.run(
        [sys.executable, str(SDK_PY), "path"], env=env, capture_output=True, text=True, timeout=60, cwd="/"
    )
    path, _, message = proc.stdout.strip().partition(" ")
    return proc.returncode, path, message


# ------------------------------------------------------------------------- detection
def test_fake_neuron_explorer_is_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip(reason="shellcheck not installed (python3 dev.py test installs it as root)")
    proc = subprocess.run(
        ["shellcheck", str(FAKES / "bin" / "neuron-explorer")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout


def test_help_documents_the_sdk_paths_and_exit_18():
    text = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "SDK >= 2.33: the NKI 0.7 kernels" in text and "SDK 2.30-2.32: refused (exit 18)" in text
    assert "  18  the SDK is refused" in text and "10, 11, 15, 13, 12, 18, 14" in text


@pytest.mark.parametrize(
    "tree, rc, path, fragments",
    [
        ("sdk", 0, "nki01", ["SDK 2.26", "neuronx-cc 2.21.18209.0+fake", "NKI 0.1 path"]),
        ("sdk_2_28", 1, "-", ["lacks neuronxcc.nki (neuronx-cc 2.23.6484.0+fake, SDK 2.28)", "Fix: "]),
        (
            "sdk_2_29",
            0,
            "nki01",
            ["SDK 2.29", "nki 0.3.0+fake", "NKI 0.1 path", "warning: neuronxcc.nki is deprecated in SDK 2.29"],
        ),
        (
            "sdk_2_32",
            3,
            "-",
            [
                "SDK 2.32",
                "refused",
                "no longer compile from SDK 2.30",
                "all-zero outputs",
                "Fix: use a DLAMI of Neuron SDK 2.26/2.27",
            ],
        ),
        ("sdk_2_33", 0, "nki07", ["SDK 2.33", "nki 0.7.0+fake", "NKI 0.7 path"]),
    ],
)
def test_each_fake_sdk_takes_its_path(tree, rc, path, fragments):
    got_rc, got_path, message = sdk_path(FAKES / tree)
    assert (got_rc, got_path) == (rc, path), message
    for f in fragments:
        assert f in message
    assert "\n" not in message, "the preflight message (and its fix) must be one line"
    if path == "nki07":
        assert "warning" not in message


def test_no_sdk_and_a_placeholder_nki_are_not_an_sdk(tmp_path):
    rc, path, message = sdk_path(tmp_path)
    assert (rc, path) == (1, "-") and "neuronx-cc is not installed" in message
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text('__version__ = "0.7.0"\n')  # no jit(): placeholder
    rc, path, message = sdk_path(tmp_path)
    assert (rc, path) == (1, "-") and "placeholder" in message


def test_interpreter_alias_is_not_mistaken_for_the_sdk(tmp_path):
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text(
        '__version__ = "0.7.0"\n__nki_kernels_sim__ = True\ndef jit(f=None, **k):\n    return f\n'
    )
    rc, path, message = sdk_path(tmp_path)
    assert (rc, path) == (1, "-") and "interpreter alias" in message


def test_newer_nki_than_documented_takes_the_07_path_with_a_warning(tmp_path):
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text('__version__ = "0.8.1"\ndef jit(f=None, **k):\n    return f\n')
    rc, path, message = sdk_path(tmp_path)
    assert (rc, path) == (0, "nki07")
    assert "SDK 2.34" in message and "newer than the documentation" in message


@pytest.mark.parametrize(
    "cc, release, extrapolated",
    [
        ("2.21.18209.0", "2.26", False),
        ("2.22.12471.0", "2.27", False),
        ("2.24.5133.0", "2.29", False),
        ("2.27.5334.0", "2.32", False),
        ("2.28.1.0", "2.33", True),
        ("2.30.0.0", "2.35", True),
        ("1.9", None, False),
        ("garbage", None, False),
        (None, None, False),
    ],
)
def test_neuronx_cc_release_table(cc, release, extrapolated):
    assert sdk.release_from_neuronx_cc(cc) == (release, extrapolated)


@pytest.mark.parametrize(
    "info, path, code",
    [
        ({"neuronx_cc": "2.22.1", "has_neuronxcc_nki": True}, "nki01", sdk.EXIT_OK),
        ({"neuronx_cc": "2.23.1", "has_neuronxcc_nki": True}, "nki01", sdk.EXIT_OK),
        ({"neuronx_cc": "2.25.3371.0", "has_neuronxcc_nki": True}, None, sdk.EXIT_REFUSED),
        ({"neuronx_cc": "2.26.6360.0", "nki": "0.5.0", "nki_is_real": True}, None, sdk.EXIT_REFUSED),
        ({"neuronx_cc": "2.28.0", "nki": "0.6.0", "nki_is_real": True}, None, sdk.EXIT_REFUSED),
        ({"nki": "0.4.0", "nki_is_real": True}, None, sdk.EXIT_REFUSED),
        ({"nki": "0.7.2", "nki_is_real": True}, "nki07", sdk.EXIT_OK),
        ({"neuronx_cc": "2.21.1", "nki": "0.7.0", "nki_is_real": False}, "nki01", sdk.EXIT_MISSING),
    ],
)
def test_decide_covers_every_branch(info, path, code):
    d = sdk.decide(info)
    assert d.code == code, d.message
    if code == sdk.EXIT_OK:
        assert d.path == path
    else:
        assert d.path is None and "Fix: " in d.message


# ------------------------------------------------------------------------- 0.7 path pieces
def test_nki07_modules_import_without_the_sdk_or_torch():
    code = (
        "import sys; import nki_kernels.hw.nki07_path, nki_kernels.hw.sdk; "
        "bad = [m for m in ('torch', 'torch_xla', 'neuronxcc', 'nki') if m in sys.modules]; "
        "assert not bad, bad; print('ok')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, env=_clean_env()
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_exec_ntff_naming_and_total_time(tmp_path):
    for name in ("lat.ntff", "lat_exec_2.ntff", "lat_exec_10.ntff", "lat_exec_3.ntff", "other_exec_4.ntff"):
        (tmp_path / name).write_text("x")
    assert [k for k, _ in nki07_path.exec_ntffs(str(tmp_path), "lat")] == [1, 2, 3, 10]
    assert nki07_path.total_time_us('log line\n{"summary": [{"total_time": "0.000250"}]}') == pytest.approx(250.0)
    with pytest.raises(ValueError, match="no positive total_time"):
        nki07_path.total_time_us('{"summary": [{"event_count": 3}]}')


def test_percentile_matches_numpy():
    values = sorted(np.random.default_rng(0).random(37).tolist())
    for p in nki07_path.PERCENTILES:
        assert nki07_path.percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_adopt_neff_takes_the_new_file_and_lists_all(tmp_path):
    old = tmp_path / "old.neff"
    old.write_text("old")
    before = nki07_path.neff_files(str(tmp_path))
    assert nki07_path.adopt_neff(str(tmp_path), before, str(tmp_path / "k.neff")) == (None, [])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "graph.neff").write_text("new")
    path, new = nki07_path.adopt_neff(str(tmp_path), before, str(tmp_path / "k.neff"))
    assert path == str(tmp_path / "k.neff") and new == ["sub/graph.neff"]
    assert (tmp_path / "k.neff").read_text() == "new" and old.exists()


def test_measure_latency_drops_warmup_and_deletes_per_execution_profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_EXPLORER_TOTAL_US", "200")
    neff = tmp_path / "k.neff"
    neff.write_text("fake")
    lat = nki07_path.measure_latency(str(neff), warmup=3, iters=6, timeout=60)
    # The fake's device time of execution k is 200 + (k mod 5) us: executions 4..9 remain.
    assert lat["samples_us"] == pytest.approx([200 + k % 5 for k in range(4, 10)])
    assert (lat["warmup"], lat["iters"]) == (3, 6)
    assert lat["percentiles_us"]["p0"] == pytest.approx(200.0)
    assert lat["percentiles_us"]["p100"] == pytest.approx(204.0)
    assert "--num-exec=9" in lat["command"] and "--profile-nth-exec=1" in lat["command"]
    assert not list(tmp_path.rglob("*.ntff")) and not (tmp_path / "latency").exists()
    with pytest.raises(ValueError, match="iters >= 1"):
        nki07_path.measure_latency(str(neff), warmup=0, iters=0)


def test_measure_latency_reports_a_failing_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_EXPLORER_FAIL", "capture")
    (tmp_path / "k.neff").write_text("fake")
    with pytest.raises(RuntimeError, match="capture failed"):
        nki07_path.measure_latency(str(tmp_path / "k.neff"), warmup=0, iters=2)


def _nki07_env(tmp_path, **extra):
    return _clean_env(
        PATH=f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=os.pathsep.join([str(ROOT), str(FAKES / "sdk_2_33"), str(FAKES / "kernels")]),
        NKI_HW_KERNEL_MATMUL="fake_hw_kernels07:matmul",
        NKI_HW_KERNEL_CONV2D="fake_hw_kernels07:conv2d",
        FAKE_LOG=str(tmp_path / "fake.log"),
        **extra,
    )


def _step(env, *args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "nki_kernels.hw.nki07_path", *args],
        env=env,
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bench_keeps_the_neff_and_records_like_the_01_path(tmp_path):
    out = tmp_path / "case"
    proc = _step(
        _nki07_env(tmp_path, NEURON_RT_VISIBLE_CORES="3"),
        "bench",
        "--kernel",
        "matmul",
        "--case",
        MATMUL.name,
        "--out",
        str(out),
        "--warmup",
        "2",
        "--iters",
        "4",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads((out / "bench.json").read_text())
    for key in ("p50_us", "p99_us", "warmup", "iters", "latency_us", "core", "sdk", "kernel_impl", "cs149"):
        assert key in rec, key
    assert (rec["api"], rec["warmup"], rec["iters"], rec["core"], rec["lnc"]) == ("nki-0.7", 2, 4, "3", 1)
    assert len(rec["samples_us"]) == 4 and rec["first_call"]["ok"]
    assert rec["sdk"]["path"]["decision"]["path"] == "nki07"
    assert rec["neff"] == f"{job.stem(MATMUL)}.neff" and (out / rec["neff"]).exists()
    assert len(rec["neff_candidates"]) == 1 and not list(out.glob("fake_*.neff"))
    log = (tmp_path / "fake.log").read_text()
    assert "nki.jit call matmul lnc=1 framework=numpy" in log and "--num-exec=6" in log


def test_bench_without_framework_debug_says_how_to_get_a_neff(tmp_path):
    proc = _step(
        _nki07_env(tmp_path, NEURON_FRAMEWORK_DEBUG="0"),
        "bench",
        "--kernel",
        "matmul",
        "--case",
        MATMUL.name,
        "--out",
        str(tmp_path / "case"),
        "--iters",
        "2",
    )
    assert proc.returncode != 0
    assert "no NEFF was written" in proc.stderr and "NEURON_FRAMEWORK_DEBUG=1" in proc.stderr


def test_check_catches_all_zero_outputs_and_records_each_check(tmp_path):
    env = _nki07_env(tmp_path, FAKE_NKI_ZEROS="1")
    proc = _step(
        env,
        "check",
        "--kernel",
        "matmul",
        "--shapes",
        "quick",
        "--out",
        str(tmp_path),
        "--no-torch",
        "--sim-check",
        "off",
    )
    assert proc.returncode == 1
    rec = json.loads((tmp_path / "matmul.nki07.json").read_text())
    (case,) = rec["cases"]
    assert not case["checks"]["numpy_call"]["ok"] and "all zeros" in case["checks"]["numpy_call"]["error"]
    ok = _step(
        _nki07_env(tmp_path), "check", "--kernel", "matmul", "--shapes", "quick", "--out", str(tmp_path), "--no-torch"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rec = json.loads((tmp_path / "matmul.nki07.json").read_text())
    checks = rec["cases"][0]["checks"]
    assert checks["numpy_call"]["ok"] and checks["sim_cross_check"]["ok"] and rec["simulator_cross_check"]
    diffs = json.loads((tmp_path / "sim_vs_device" / f"{job.stem(MATMUL)}.json").read_text())["max_abs_diff"]
    assert set(diffs) >= {"device_vs_oracle", "sdk_simulator_vs_device", "interpreter_vs_device"}


def test_smoke_names_the_failing_construct_and_its_flag(tmp_path):
    env = _nki07_env(tmp_path, NKI_HW_SMOKE_MODULE="fake_constructs07", FAKE_SMOKE_FAIL="row_max")
    proc = _step(env, "smoke", "--out", str(tmp_path / "smoke.json"), "--junitxml", str(tmp_path / "smoke.xml"))
    assert proc.returncode == 1
    assert "construct row_max: FAILED" in proc.stdout and "avoid it with --fake-flag" in proc.stdout
    assert "construct copy_roundtrip: ok" in proc.stdout
    assert json.loads((tmp_path / "smoke.json").read_text())["failed"] == ["row_max"]
    import xml.etree.ElementTree as ET

    cases = {c.get("name"): c.find("failure") for c in ET.parse(tmp_path / "smoke.xml").getroot().iter("testcase")}
    assert set(cases) == {"copy_roundtrip", "row_max"} and cases["copy_roundtrip"] is None
    assert "used by attention; avoid it with --fake-flag" in cases["row_max"].get("message")


# ------------------------------------------------------------------------- run_hw.sh
@pytest.fixture
def fake(tmp_path):
    product = tmp_path / "product_name"
    product.write_text("trn2.3xlarge\n")
    env = _nki07_env(
        tmp_path,
        NKI_HW_PRODUCT_NAME_FILE=str(product),
        NKI_HW_VENV_CANDIDATES=str(tmp_path / "no-such-venv"),
        NKI_HW_SMOKE_MODULE="fake_constructs07",
        FAKE_REAL_PYTHON=sys.executable,
    )
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES / "sdk_2_33"), str(FAKES / "kernels")])
    return {"env": env, "tmp": tmp_path, "results": tmp_path / "results", "log": tmp_path / "fake.log"}


def run(fake, *args, env=None, timeout=150):
    argv = ["bash", str(SCRIPT), "--results-dir", str(fake["results"]), "--venv", str(FAKES / "venv"), *args]
    return subprocess.run(argv, env=env or fake["env"], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _folder(fake):
    (folder,) = sorted(fake["results"].iterdir())
    return folder


def _log(fake):
    return fake["log"].read_text().splitlines() if fake["log"].exists() else []


@pytest.mark.parametrize(
    "tree, code, message",
    [
        ("sdk_2_32", 18, "SDK 2.32 (neuronx-cc 2.27.5334.0+fake, nki 0.6.0+fake) refused"),
        ("sdk_2_28", 12, "lacks neuronxcc.nki"),
    ],
)
def test_run_hw_refuses_sdks_that_cannot_run_either_path(fake, tree, code, message):
    env = dict(fake["env"], PYTHONPATH=str(FAKES / tree))
    proc = run(fake, "--kernels", "matmul", env=env)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert f"FAIL[{code}] " in proc.stderr and message in proc.stderr and "Fix: " in proc.stderr
    assert f"preflight failed (exit {code}); nothing was run" in proc.stderr
    assert not fake["results"].exists()
    assert not any(line.startswith(("pip", "nki.")) for line in _log(fake))


@pytest.mark.parametrize("tree, release, warning", [("sdk", "2.26", False), ("sdk_2_29", "2.29", True)])
def test_run_hw_takes_the_01_path_on_2_26_and_on_2_29_with_a_warning(fake, tree, release, warning):
    env = dict(
        fake["env"],
        PYTHONPATH=os.pathsep.join([str(FAKES / tree), str(FAKES / "kernels")]),
        NKI_HW_KERNEL_MATMUL="fake_hw_kernels:matmul",
    )
    proc = run(fake, "--kernels", "matmul", "--skip-install", "--skip-tests", "--no-estimate", "--iters", "2", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SDK {release}" in proc.stdout and "NKI 0.1 path" in proc.stdout
    assert (f"warning: neuronxcc.nki is deprecated in SDK {release}" in proc.stdout) == warning
    m = json.loads((_folder(fake) / "manifest.json").read_text())
    assert (m["environment"]["nki_path"], m["environment"]["profiler"]) == ("nki01", "neuron-profile")
    assert any(line.startswith("nki.benchmark") for line in _log(fake))
    assert not any(line.startswith("neuron-explorer") for line in _log(fake))


def test_run_hw_on_sdk_2_33_needs_neuron_explorer(fake, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("neuron-ls", "neuron-profile"):
        (bin_dir / tool).symlink_to(FAKES / "bin" / tool)
    env = dict(fake["env"], PATH=f"{bin_dir}{os.pathsep}{_clean_env()['PATH']}")
    proc = run(fake, "--kernels", "matmul", env=env)
    assert proc.returncode == 15, proc.stdout + proc.stderr
    assert "FAIL[15] neuron-explorer not found" in proc.stderr


def test_dry_run_on_sdk_2_33_prints_the_07_plan_and_runs_nothing(fake):
    proc = run(fake, "--dry-run", "--kernels", "matmul", "--cores", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "NKI 0.7 path" in out and "path nki07" in out and "FAIL" not in out
    stem = job.stem(MATMUL)
    for text in (
        "nki_kernels.hw.nki07_path smoke --out",
        "nki_kernels.hw.nki07_path check --kernel matmul",
        f"nki_kernels.hw.nki07_path bench --kernel matmul --case {MATMUL.name}",
        f"nki_kernels.hw.nki07_path estimate --kernel matmul --case {MATMUL.name}",
        "NEURON_LOGICAL_NC_CONFIG=1 NEURON_FRAMEWORK_DEBUG=1",
        f"neuron-explorer capture -n {stem}.neff -s {stem}.ntff --profile-nth-exec=2",
        f"neuron-explorer view -n {stem}.neff -s {stem}.ntff --output-format summary-json",
        f"neuron-explorer view -n {stem}.neff -s {stem}.ntff --output-format perfetto",
    ):
        assert text in out, text
    assert "neuron-profile" not in out and "nki_kernels.hw.job bench" not in out
    assert out.index("nki07_path smoke") < out.index("nki07_path check")
    assert not fake["results"].exists()
    assert _log(fake) == ["neuron-ls --json-output"], "dry run ran more than the read-only probe"


def test_full_fake_run_on_sdk_2_33(fake):
    env = dict(fake["env"], FAKE_PERFETTO_IGNORES_OUTPUT_FILE="1")
    proc = run(
        fake, "--kernels", "matmul,conv2d", "--cores", "2", "--no-estimate", "--warmup", "1", "--iters", "3", env=env
    )
    # No torch here: the torch-neuronx check fails, so the kernel checks fail and the run says so.
    assert proc.returncode == 20, proc.stdout + proc.stderr
    folder = _folder(fake)
    m = json.loads((folder / "manifest.json").read_text())
    assert (m["status"], m["exit_code"]) == ("completed_with_failures", 20)
    assert (m["environment"]["nki_path"], m["environment"]["profiler"]) == ("nki07", "neuron-explorer")
    assert m["environment"]["sdk_path"]["decision"]["release"] == "2.33"
    steps = {s["name"]: s for s in m["steps"]}
    names = [s["name"] for s in m["steps"]]
    assert steps["constructs"]["status"] == "passed" and names.index("constructs") < names.index("hw_tests-matmul")
    for kernel in ("matmul", "conv2d"):
        assert steps[f"hw_tests-{kernel}"]["status"] == "failed"
        rec = json.loads((folder / "hw_tests" / f"{kernel}.nki07.json").read_text())
        for case in rec["cases"]:
            assert case["checks"]["numpy_call"]["ok"] and case["checks"]["sim_cross_check"]["ok"]
            assert not case["checks"]["torch_xla"]["ok"] and "torch" in case["checks"]["torch_xla"]["error"]
    files = {f["path"] for f in m["files"]}
    assert {"hw_tests/smoke_nki07.json", "hw_tests/constructs.junit.xml", "env/sdk_path.json"} <= files
    for case in registry.select("matmul,conv2d", "quick", bench=True):
        stem = job.stem(case)
        for prefix in ("bench", "capture", "summary-json", "summary-text", "perfetto"):
            assert steps[f"{prefix}-{stem}"]["status"] == "passed", prefix
        for suffix in (".neff", ".ntff", ".summary.json", ".summary.txt", ".pftrace"):
            assert f"{case.kernel}/{case.name}/{stem}{suffix}" in files, suffix
        assert not any(
            p.startswith(f"{case.kernel}/{case.name}/") and ("_exec_" in p or "latency/" in p) for p in files
        )
        bench = json.loads((folder / case.kernel / case.name / "bench.json").read_text())
        assert (bench["api"], bench["warmup"], bench["iters"], len(bench["samples_us"])) == ("nki-0.7", 1, 3, 3)
        assert bench["core"] == steps[f"bench-{stem}"]["core"]
    summary = (folder / "SUMMARY.md").read_text()
    assert "neuron-explorer (NKI 0.7 path)" in summary and "| matmul |" in summary
    assert not any(line.startswith(("neuron-profile", "nki.benchmark")) for line in _log(fake))


def test_a_failing_construct_stops_the_run_before_any_kernel_job(fake):
    env = dict(fake["env"], FAKE_SMOKE_FAIL="row_max")
    proc = run(fake, "--kernels", "matmul", "--skip-install", "--no-estimate", env=env)
    assert proc.returncode == 19, proc.stdout + proc.stderr
    assert "construct smoke test failed; nothing was benchmarked" in proc.stderr
    assert "smoke_nki07::row_max: " in proc.stderr and "(used by attention; avoid it with --fake-flag)" in proc.stderr
    assert "copy_roundtrip" not in proc.stderr
    folder = _folder(fake)
    m = json.loads((folder / "manifest.json").read_text())
    assert [s["name"] for s in m["steps"]] == ["constructs"] and m["steps"][0]["status"] == "failed"
    assert "row_max" in m["failure_reason"]
    log = (folder / m["steps"][0]["log"]).read_text()
    assert "construct row_max: FAILED" in log and "avoid it with --fake-flag" in log
    assert not any("matmul" in line for line in _log(fake))


def test_official_simulate_runs_a_host_entry_through_its_jitted_kernel(monkeypatch):
    calls = []

    def simulate(kernel):
        return lambda *a, **kw: calls.append((kernel, a, kw)) or "simulated"

    monkeypatch.setattr(nki07_path, "_nki", lambda: type("N", (), {"simulate": staticmethod(simulate)}))

    class Entry:
        kernel = "the jitted kernel"

        def prepare(self, x, scale=1):
            return (x, "plan"), {"scale": scale}

    assert nki07_path.official_simulate(Entry(), (1,), {"scale": 2}) == "simulated"
    assert calls == [("the jitted kernel", (1, "plan"), {"scale": 2})]

    def plain(x):
        return x

    nki07_path.official_simulate(plain, (3,), {})
    assert calls[-1] == (plain, (3,), {})


# ------------------------------------------------------------------------- the real 0.7 kernels
def test_estimate_and_simulate_steps_run_the_07_kernels_on_the_interpreter(tmp_path):
    """The 0.7 path's CPU steps on the project's own NKI 0.7 kernels (no fake kernels): the
    cost-model record of the 2.26 path's format, and the interpreter output for the
    simulator cross-check, equal to the oracle."""
    env = _clean_env(NKI_BACKEND="sim", PYTHONPATH=str(ROOT))
    proc = _step(env, "estimate", "--kernel", "matmul", "--case", MATMUL.name, "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads((tmp_path / f"{job.stem(MATMUL)}.estimate.json").read_text())
    assert rec["kernel_impl"] == registry.MATMUL.entry_07 and rec["api"] == "nki-0.7"
    assert rec["latency_us"] > 0 and rec["summary"]["total_time"] > 0 and "not a measurement" in rec["note"]
    out = tmp_path / "sim.npy"
    proc = _step(env, "simulate", "--kernel", "matmul", "--case", MATMUL.name, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    from nki_kernels.hw import device

    args, kwargs = device.make_inputs(MATMUL, job.DEFAULT_SEED)
    device.assert_close(np.load(out), device.reference(MATMUL, args, kwargs), MATMUL.dtype, "interpreter")
