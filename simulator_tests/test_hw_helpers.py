"""The hardware-path helpers (nki_kernels/hw), exercised here with fakes: no Trainium, no SDK."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

from nki_kernels.hw import compare, device, env, job, profile
from nki_kernels.kernels import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAKES = ROOT / "scripts" / "fakes"

TRN2_3XL = [
    {
        "instance_type": "trn2.3xlarge",
        "neuron_device": 0,
        "bdf": "0000:33:00.0",
        "nc_count": 4,
        "logical_neuroncore_config": 2,
        "memory_size": 103079215104,
        "neuroncore_ids": [0, 1, 2, 3],
        "neuron_processes": [],
    }
]


def _two_devices(busy_second: bool):
    devs = [dict(TRN2_3XL[0]), dict(TRN2_3XL[0], neuron_device=1, neuroncore_ids=[4, 5, 6, 7])]
    devs[0]["neuron_processes"] = [{"pid": 1, "command": "neuron-ls --json-output"}]
    if busy_second:
        devs[1]["neuron_processes"] = [{"pid": 2, "command": "python train.py"}]
    return devs


@pytest.fixture
def fake_nki(monkeypatch):
    """The fake ``neuronxcc.nki`` module, loaded under a private name (sys.modules untouched)."""
    spec = importlib.util.spec_from_file_location("_fake_nki_for_tests", FAKES / "sdk/neuronxcc/nki/__init__.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(device, "_nki", lambda: mod)
    monkeypatch.syspath_prepend(str(FAKES / "kernels"))
    monkeypatch.setenv("NKI_HW_KERNEL_MATMUL", "fake_hw_kernels:matmul")
    monkeypatch.setenv("NKI_HW_KERNEL_CONV2D", "fake_hw_kernels:conv2d")
    monkeypatch.delenv("FAKE_LOG", raising=False)
    return mod


# ------------------------------------------------------------------------- import safety
def test_hw_package_imports_without_sdk_or_torch():
    code = (
        "import sys; import nki_kernels.hw, nki_kernels.hw.env, "
        "nki_kernels.hw.device, nki_kernels.hw.profile, nki_kernels.hw.compare, "
        "nki_kernels.hw.torch_path, nki_kernels.hw.job, nki_kernels.kernels.registry; "
        "bad = [m for m in ('torch', 'torch_xla', 'neuronxcc') if m in sys.modules]; "
        "assert not bad, bad; print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# ------------------------------------------------------------------------- env
def test_parse_neuron_ls_and_free_cores():
    devs = env.parse_neuron_ls(json.dumps(TRN2_3XL))
    assert env.free_cores(devs) == [0, 1, 2, 3]
    # neuron-ls's own process does not make a device busy; a runtime process does.
    assert env.free_cores(_two_devices(busy_second=True)) == [0, 1, 2, 3]
    assert env.free_cores(_two_devices(busy_second=False)) == list(range(8))
    # Without neuroncore_ids the ids follow nc_count per device.
    assert env.device_cores({"neuron_device": 2, "nc_count": 4}) == [8, 9, 10, 11]


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not JSON"),
        ('{"neuron_device": 0}', "must be a list"),
        ('[{"bdf": "x"}]', "no 'neuron_device' field"),
    ],
)
def test_parse_neuron_ls_names_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        env.parse_neuron_ls(text)


def test_choose_cores_by_count_and_by_ids():
    free = [0, 1, 2, 3]
    assert env.choose_cores("2", free) == [0, 1]
    assert env.choose_cores("1-3", free) == [1, 2, 3]
    assert env.choose_cores("0,2", free) == [0, 2]
    with pytest.raises(ValueError, match="asked for 5 free NeuronCores, only 4 free"):
        env.choose_cores("5", free)
    with pytest.raises(ValueError, match=r"NeuronCores \[4, 5\] are busy or absent"):
        env.choose_cores("3-5", free)
    with pytest.raises(ValueError, match="at least 1"):
        env.choose_cores("0", free)
    with pytest.raises(ValueError, match="end before start"):
        env.parse_core_spec("3-1")
    with pytest.raises(ValueError, match="use ids and ranges"):
        env.parse_core_spec("a-b")


def test_instance_type_reads_the_product_name(tmp_path, monkeypatch):
    f = tmp_path / "product_name"
    f.write_text("trn2.48xlarge\n")
    assert env.instance_type(str(f)) == "trn2.48xlarge"
    monkeypatch.setenv("NKI_HW_PRODUCT_NAME_FILE", str(f))
    assert env.instance_type() == "trn2.48xlarge"
    assert env.instance_type(str(tmp_path / "missing")) is None


def test_sdk_release_and_problems():
    assert env.sdk_release_for("2.21.18209.0") == "2.26"
    assert env.sdk_release_for("2.22.12471.0+abc") == "2.27"
    assert env.sdk_release_for("2.23.6484.0") == "2.28"
    assert env.sdk_release_for(None) is None
    base = {"neuronx_cc": None, "sdk_release": None, "has_neuronxcc": False, "has_neuronxcc_nki": False}
    assert "neuronx-cc is not installed" in env.sdk_problem(base)
    new = dict(base, neuronx_cc="2.23.6484.0", sdk_release="2.28", has_neuronxcc=True)
    msg = env.sdk_problem(new)
    assert "lacks neuronxcc.nki" in msg and "2.23.6484.0" in msg and "SDK 2.28" in msg
    assert env.sdk_problem(dict(new, has_neuronxcc_nki=True)) is None


def test_hardware_skip_reason_explains_every_missing_piece(monkeypatch):
    monkeypatch.setenv("NKI_BACKEND", "sim")
    reason = env.hardware_skip_reason()
    assert "NKI_BACKEND=sim" in reason
    if not os.path.exists("/dev/neuron0"):
        assert "no Neuron device" in reason
    assert env.device_problem("/nonexistent/neuron*") is not None


# ------------------------------------------------------------------------- device helpers
SMALL_CASES = [c for c in registry.select(None, "cs149") if c.flops() <= 2e9]  # every kernel and dtype


@pytest.mark.parametrize("case", SMALL_CASES, ids=lambda c: c.case_id)
def test_make_inputs_are_seeded_and_typed(case):
    (a1, k1), (a2, _), (a3, _) = (device.make_inputs(case, s) for s in (0, 0, 1))
    assert all(np.array_equal(x, y) for x, y in zip(a1, a2, strict=True))
    assert not np.array_equal(np.asarray(a1[0], np.float64), np.asarray(a3[0], np.float64))
    assert all(np.asarray(x).dtype == registry.np_dtype(case.dtype) for x in a1)
    if case.kernel == "conv2d":
        assert k1 == {"pool_size": case.p["pool_size"]}
        assert a1[0].shape == (case.p["B"], case.p["C_in"], case.p["H"], case.p["W"])
        assert np.any(a1[2]) == case.p["bias"]


def test_assert_close_accepts_tolerance_and_rejects_each_failure_mode():
    ref = np.linspace(1.0, 2.0, 12).reshape(3, 4)
    assert device.assert_close(ref * (1 + 5e-5), ref, "float32") > 0
    with pytest.raises(AssertionError, match=r"shape \(4, 3\), expected \(3, 4\)"):
        device.assert_close(ref.T, ref, "float32")
    with pytest.raises(AssertionError, match="1 NaN/inf"):
        device.assert_close(np.where(ref > 1.95, np.nan, ref), ref, "float32")
    with pytest.raises(AssertionError, match="all zeros"):
        device.assert_close(np.zeros_like(ref), ref, "float32")
    with pytest.raises(AssertionError, match=r"1/12 elements outside rtol=0.0001.*worst at \(2, 3\)"):
        device.assert_close(np.where(ref == 2.0, 2.01, ref), ref, "float32", "demo")
    # bf16 tolerance is looser than fp32's
    device.assert_close(ref * (1 + 1e-2), ref, "bfloat16")


def test_kernel_target_honours_the_override(monkeypatch):
    assert device.kernel_target("conv2d") == "nki_kernels.kernels.conv2d:fused_conv2d_maxpool"
    monkeypatch.setenv("NKI_HW_KERNEL_CONV2D", "student.conv2d:fused_conv2d_maxpool")
    assert device.kernel_target("conv2d") == "student.conv2d:fused_conv2d_maxpool"
    with pytest.raises(KeyError, match="unknown kernel 'conv3d'"):
        device.kernel_target("conv3d")


def test_run_benchmark_reads_every_percentile(fake_nki, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAKE_NKI_LATENCY_US", "40")
    lat = device.run_benchmark(lambda *a: None, (), {}, warmup=3, iters=7, save_neff_name="k.neff")
    assert lat.percentiles_us == {f"p{p}": 40 * (1 + p / 100) for p in device.PERCENTILES}
    assert (lat.warmup, lat.iters, lat.p50, lat.p99) == (3, 7, 60.0, 79.6)
    assert (tmp_path / "k.neff").exists()
    with pytest.raises(ValueError, match="iters >= 1"):
        device.run_benchmark(lambda: None, (), {}, warmup=1, iters=0)


def test_baremetal_needs_the_sdk_and_says_so():
    if importlib.util.find_spec("neuronxcc") is not None:
        pytest.skip(reason="a neuronxcc package is installed here")
    with pytest.raises(ImportError, match="neuronxcc.nki is not importable: run on a trn2 instance"):
        device.run_baremetal(lambda: None)


# ------------------------------------------------------------------------- job
@pytest.mark.parametrize(
    "p99, verdict",
    [
        (4000.0, "meets optimized threshold"),
        (4596.0, "meets optimized threshold"),
        (4700.0, "meets relaxed threshold only"),
        (5000.0, "above relaxed threshold"),
    ],
)
def test_cs149_verdict(p99, verdict):
    v = job.cs149_verdict(p99, (4964.0, 4596.0))
    assert v["verdict"] == verdict
    assert v["ratio_to_optimized"] == pytest.approx(p99 / 4596.0)
    assert job.cs149_verdict(p99, None) is None


def test_bench_case_records_latency_thresholds_and_estimate_ratio(fake_nki, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "3")
    monkeypatch.setenv("FAKE_NKI_LATENCY_US", "100")
    case = registry.get_case("conv2d", "b1_ci128_co128_h32_w16_k3_p1_fp32")
    out = tmp_path / "case"
    out.mkdir()
    (out / f"{job.stem(case)}.estimate.json").write_text(json.dumps({"latency_us": 50.0}))
    rec = job.bench_case(case, str(out), warmup=2, iters=5)
    on_disk = json.loads((out / "bench.json").read_text())
    assert on_disk == json.loads(json.dumps(rec))
    assert (rec["warmup"], rec["iters"], rec["core"]) == (2, 5, "3")
    assert (rec["p50_us"], rec["p99_us"]) == (150.0, 199.0)
    assert rec["neff"] == f"{job.stem(case)}.neff" and (out / rec["neff"]).exists()
    assert rec["cs149"]["verdict"] == "above relaxed threshold"  # fake latencies, threshold 110 us
    assert rec["vs_estimate"]["ratio_p50"] == pytest.approx(3.0)
    assert rec["kernel_impl"] == "fake_hw_kernels:conv2d"
    assert set(rec["sdk"]) >= {"neuronx_cc", "sdk_release", "torch_neuronx"}


def test_estimate_case_writes_the_cost_model_record(fake_nki, tmp_path, monkeypatch):
    class FakeEstimate:
        latency_us, mfu, flops, hbm_bytes, dma_count = 12.5, 0.25, 1.0e6, 4096, 7
        engine_busy_us = {"PE": 3.0, "DMA": 9.0}

        def summary_dict(self):
            return {"total_time": 12.5e-6, "dma_transfer_count": 7}

        def chrome_trace(self):
            return {"traceEvents": [{"name": "nc_matmul", "ph": "X", "ts": 0, "dur": 1}]}

    calls = []
    perf = types.ModuleType("nki_kernels.perf")
    perf.estimate = lambda kernel, *args, **kwargs: calls.append((kernel, args, kwargs)) or FakeEstimate()
    monkeypatch.setitem(sys.modules, "nki_kernels.perf", perf)
    monkeypatch.setenv("NKI_BACKEND", "sim")
    case = registry.get_case("matmul", "k128_m128_n512_fp32")
    rec = job.NKI01.estimate_here(case, str(tmp_path))  # in-process: the fake cost model above
    assert calls and calls[0][0].__name__ == "matmul" and calls[0][1][0].shape == (128, 128)
    saved = json.loads((tmp_path / f"{job.stem(case)}.estimate.json").read_text())
    assert saved["summary"] == {"total_time": 12.5e-6, "dma_transfer_count": 7}
    assert saved["latency_us"] == 12.5 and rec["trace"] == f"{job.stem(case)}.estimate.trace.json"
    assert json.loads((tmp_path / rec["trace"]).read_text())["traceEvents"][0]["name"] == "nc_matmul"


@pytest.mark.parametrize("with_fake_sdk", [False, True])
def test_own_kernel_estimate_runs_under_the_interpreter_alias(tmp_path, monkeypatch, with_fake_sdk):
    """The own-kernel route: NKI_HW_KERNEL_CONV2D=<a CS149-style conv2d.py> must estimate on a laptop
    (its `import neuronxcc.nki` resolves to the interpreter) and, where a real SDK is importable
    (the fake one here), must still run on the interpreter's objects only."""
    data = ROOT / "simulator_tests" / "data" / "cs149_like"
    path = [str(data)] + ([str(FAKES / "sdk")] if with_fake_sdk else [])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    monkeypatch.setenv("NKI_HW_KERNEL_CONV2D", "conv2d_correct:fused_conv2d_maxpool")
    case = registry.get_case("conv2d", "b1_ci128_co128_h32_w16_k3_p1_fp32")
    rec = job.estimate_case(case, str(tmp_path))
    assert rec["kernel_impl"] == "conv2d_correct:fused_conv2d_maxpool"
    assert rec["executed_by"].startswith("nki_kernels.sim")
    assert np.isfinite(rec["latency_us"]) and rec["latency_us"] > 0
    assert (tmp_path / f"{job.stem(case)}.estimate.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    out = job.simulate_case(case, str(tmp_path / "sim.npy"))
    y = np.load(out)
    assert np.all(np.isfinite(y)) and np.any(y != 0)
    args, kwargs = device.make_inputs(case, 0)
    device.assert_close(y, device.reference(case, args, kwargs), case.dtype)


def test_interpreter_alias_refuses_to_mix_with_a_loaded_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "neuronxcc", types.ModuleType("neuronxcc"))
    with pytest.raises(RuntimeError, match="real neuronxcc is already imported"):
        job.NKI01.interpreter()


def test_estimate_step_failure_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_HW_KERNEL_MATMUL", "no_such_module:matmul")
    with pytest.raises(RuntimeError, match=r"job estimate matmul.*failed \(exit 1\): ModuleNotFoundError"):
        job.estimate_case(registry.get_case("matmul", "k128_m128_n512_fp32"), str(tmp_path))


# ------------------------------------------------------------------------- compare
SUMMARY = {
    "summary": [
        {"nc_idx": 0, "nd_idx": 1, "total_time": "0.000200", "dma_transfer_count": 40, "event_count": 900, "label": "k"}
    ]
}
ESTIMATE = {"total_time": 1.0e-4, "dma_transfer_count": 20, "flops": 3.0e6}


def test_compare_gives_measured_over_estimated_per_metric():
    res = compare.compare(compare.load_profile_summary(SUMMARY), compare.load_estimate(ESTIMATE))
    ratios = {r["metric"]: r["ratio"] for r in res["rows"]}
    assert ratios == {"dma_transfer_count": pytest.approx(2.0), "total_time": pytest.approx(2.0)}
    assert res["only_estimated"] == ["flops"]
    assert res["only_measured"] == ["event_count"]  # identifiers (nc_idx, nd_idx) and text skipped


def test_compare_accepts_records_lists_and_log_lines_before_json(tmp_path):
    s = tmp_path / "s.json"
    s.write_text("INFO processing profile...\n" + json.dumps(SUMMARY["summary"]))
    e = tmp_path / "e.json"
    e.write_text(json.dumps({"latency_us": 100.0, "summary": {"total_time": 4.0e-4}}))
    res = compare.compare_files(str(s), str(e))
    assert [(r["metric"], r["ratio"]) for r in res["rows"]] == [("total_time", pytest.approx(0.5))]


def test_compare_errors_name_the_problem():
    with pytest.raises(ValueError, match="no common metric"):
        compare.compare({"total_time": 1.0}, {"flops": 2.0})
    with pytest.raises(ValueError, match=r"metrics \['mfu'\] missing"):
        compare.compare({"total_time": 1.0}, {"total_time": 2.0}, ["mfu"])
    with pytest.raises(ValueError, match="2 profiles with different total_time"):
        compare.load_profile_summary([{"total_time": 1}, {"total_time": 2}])
    res = compare.compare({"total_time": 1.0}, {"total_time": 0})
    assert res["rows"][0]["ratio"] is None


def test_compare_cli_prints_table_and_writes_json(tmp_path, capsys):
    s, e, out = tmp_path / "s.json", tmp_path / "e.json", tmp_path / "cmp.json"
    s.write_text(json.dumps(SUMMARY))
    e.write_text(json.dumps(ESTIMATE))
    assert compare.main([str(s), str(e), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "total_time" in text and "2.000" in text and "not asserted" in text
    assert json.loads(out.read_text())["rows"][0]["metric"] == "dma_transfer_count"
    assert compare.main([str(s), str(tmp_path / "missing.json")]) == 1


# ------------------------------------------------------------------------- profile
def test_profile_commands():
    assert profile.capture_cmd("k.neff", "k.ntff") == ["neuron-profile", "capture", "-n", "k.neff", "-s", "k.ntff"]
    assert profile.view_cmd("k.neff", "k.ntff", "summary-json")[-2:] == ["--output-format", "summary-json"]
    with pytest.raises(ValueError, match="unknown --output-format 'html'"):
        profile.view_cmd("k.neff", "k.ntff", "html")


@pytest.mark.parametrize("ignores_output_file", ["0", "1"])
def test_profile_neff_with_fake_neuron_profile(tmp_path, monkeypatch, ignores_output_file):
    monkeypatch.setenv("PATH", f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PERFETTO_IGNORES_OUTPUT_FILE", ignores_output_file)
    neff = tmp_path / "conv.neff"
    neff.write_text("fake")
    files = profile.profile_neff(str(neff))
    assert pathlib.Path(files.ntff).read_text().startswith("fake trace")
    assert json.loads(pathlib.Path(files.summary_json).read_text())["summary"][0]["total_time"] == "0.000123"
    assert "total_time" in pathlib.Path(files.summary_text).read_text()
    assert files.perfetto == str(tmp_path / "conv.pftrace") and pathlib.Path(files.perfetto).exists()
    assert not (tmp_path / "ntff.pftrace").exists()


def test_profile_neff_reports_the_tool_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(RuntimeError, match="NEFF 'missing.neff' not found"):
        profile.profile_neff(str(tmp_path / "missing.neff"))


# ------------------------------------------------------------------------- torch path
def test_torch_modules_need_torch_only_when_used():
    from nki_kernels.hw import torch_path

    if importlib.util.find_spec("torch") is not None:
        pytest.skip(reason="torch is installed here; the hardware tests cover the torch path")
    with pytest.raises(ModuleNotFoundError, match="torch"):
        torch_path.Conv2dMaxPool  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        torch_path.Nope  # noqa: B018


# ------------------------------------------------------------------------- hw_tests
def _pytest_hw_tests(**env_extra):
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith("NKI_HW_")}
    env_vars.update(NKI_BACKEND="sim", **env_extra)
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "hw_tests"), "-rs", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_vars,
        timeout=120,
    )


def _n_constructs() -> int:
    """Tests in hw_tests/test_constructs.py (one per construct; its CONSTRUCTS list)."""
    path = pathlib.Path(__file__).resolve().parents[1] / "hw_tests" / "test_constructs.py"
    spec = importlib.util.spec_from_file_location("hw_constructs_count", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return len(mod.CONSTRUCTS)


def test_hw_tests_collect_and_skip_with_their_reason():
    proc = _pytest_hw_tests(NKI_HW_SHAPES="quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    correct = registry.select(None, "quick", correctness=True)
    expected = (
        2 * len(correct)
        + sum(c.sim_ok() for c in correct)  # baremetal, torch, sim-vs-device
        + len(registry.select(None, "quick", bench=True))  # benchmark
        + _n_constructs()
    )  # test_constructs.py smoke kernels
    assert f"{expected} skipped" in proc.stdout
    assert "SKIPPED" in proc.stdout and "hardware: NKI_BACKEND=sim forces the NumPy interpreter" in proc.stdout
    assert " passed" not in proc.stdout and "error" not in proc.stdout.lower()


def test_hw_tests_fail_loudly_when_hardware_is_required():
    proc = _pytest_hw_tests(NKI_HW_SHAPES="quick", NKI_HW_REQUIRE="1")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "NKI_HW_REQUIRE=1 but the hardware tests cannot run" in proc.stderr
