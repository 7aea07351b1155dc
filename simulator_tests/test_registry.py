"""The kernel registry (nki_kernels/kernels/registry.py): its facts, its feasibility check, and that
every consumer (verify, the cost-model table and profile, the hardware job, the tests) enumerates
the same kernels and shapes from it."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.kernels import registry

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------- facts
def test_every_kernel_has_both_generations_an_oracle_and_every_named_set():
    assert tuple(s.name for s in registry.SPECS) == registry.KERNELS
    for spec in registry.SPECS:
        assert callable(spec.load("0.1")) and callable(spec.load("0.7")) and callable(spec.load_oracle())
        assert set(spec.shape_sets) == set(registry.SET_NAMES)
        for name in ("verify-quick", "verify", "headline", "hw-quick"):
            assert spec.cases(name), (spec.name, name)
        assert set(spec.cases("verify-quick")) < set(spec.cases("verify"))
        assert spec.default_case() in spec.cases("headline")
    assert registry.CONV2D.cases("cs149") and not registry.MATMUL.cases("cs149")


def test_cs149_correctness_matrix_is_in_the_cs149_set():
    cases = registry.select("conv2d", "cs149", correctness=True)
    small = {
        (c.p["C_in"], c.p["C_out"])
        for c in cases
        if (c.p["B"], c.p["H"], c.p["W"], c.p["bias"], c.p["pool_size"]) == (4, 32, 16, False, 1)
    }
    assert small == {(128, 128), (128, 256), (256, 128), (256, 256)}
    large = {
        (c.p["bias"], c.p["pool_size"])
        for c in cases
        if (c.p["B"], c.p["C_in"], c.p["C_out"], c.p["H"], c.p["W"]) == (4, 256, 256, 224, 224)
    }
    assert large == {(False, 1), (True, 1), (True, 2)}


def test_cs149_performance_cases_carry_the_harness_thresholds():
    perf = {
        (c.dtype, c.p["H"], c.p["pool_size"]): c.threshold_us
        for c in registry.select("conv2d", "cs149", bench=True)
        if c.level == "cs149"
    }
    # stanford-cs149/asst4-trainium2 part2/test_harness.py @67a1f8bf, performance_requirements_by_dtype_size
    assert perf == {
        ("float32", 224, 1): (4964.0, 4596.0),
        ("float32", 224, 2): (4964.0, 4596.0),
        ("float16", 224, 1): (1365.0, 1002.0),
        ("float16", 224, 2): (1365.0, 1002.0),
        ("float32", 32, 1): (110.0, 110.0),
        ("float32", 32, 2): (110.0, 110.0),
        ("float16", 32, 1): (84.0, 84.0),
        ("float16", 32, 2): (84.0, 84.0),
    }
    correctness_only = [c for c in registry.CONV2D.cases("cs149") if not c.bench]
    assert correctness_only and all(c.threshold_us is None for c in correctness_only)


def test_hardware_sets_are_nested_and_every_kernel_has_a_quick_case():
    quick, cs149, full = (set(registry.select(None, s)) for s in registry.HW_SETS)
    assert quick < cs149 < full
    assert {c.kernel for c in quick} == set(registry.KERNELS)
    names = [c.case_id for c in registry.all_cases()]
    assert len(names) == len(set(names)), "case names must identify a case"


def test_select_and_get_case_reject_unknown_names():
    with pytest.raises(ValueError, match="unknown kernel 'conv3d'; allowed: conv2d, matmul, attention"):
        registry.select("conv2d,conv3d", "quick")
    with pytest.raises(ValueError, match="unknown shape set 'huge'; allowed: quick, cs149, full"):
        registry.select(None, "huge")
    with pytest.raises(KeyError, match="no case 'nope' for kernel 'matmul'"):
        registry.get_case("matmul", "nope")
    with pytest.raises(KeyError, match="unknown kernel 'conv3d'"):
        registry.get("conv3d")


@pytest.mark.parametrize("spec", ["", " ", ",", " , "])
def test_an_empty_kernel_list_is_an_error_not_all(spec):
    with pytest.raises(ValueError, match="empty kernel list"):
        registry.parse_kernels(spec)
    assert registry.parse_kernels(None) == registry.parse_kernels("all") == registry.KERNELS


def test_registry_lists_a_set_with_only_the_standard_library():
    proc = subprocess.run(
        [
            sys.executable,
            "-S",
            "-m",
            "nki_kernels.kernels.registry",
            "--set",
            "hw-quick",
            "--kernels",
            "conv2d,matmul",
            "--bench-only",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    expected = [f"{c.kernel} {c.name}" for c in registry.select("conv2d,matmul", "quick", bench=True)]
    assert proc.stdout.splitlines() == expected
    bad = subprocess.run(
        [sys.executable, "-S", "-m", "nki_kernels.kernels.registry", "--kernels", ""],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("registry: empty kernel list")


def test_case_names_flops_and_cli_values():
    conv = registry.get_case("conv2d", "b1_ci256_co256_h224_w224_k3_p1_fp32")
    assert conv.flops() == pytest.approx(58.14e9, rel=1e-3)  # trn2-hardware.md section 5
    mm = registry.get_case("matmul", "k1024_m1024_n1024_bf16")
    assert mm.flops() == 2 * 1024**3
    for spec in registry.SPECS:
        for case in spec.cases("headline"):
            again = spec.case_from_cli(
                spec.cli_values(case), case.dtype, pool=case.p.get("pool_size"), causal=case.p.get("causal", False)
            )
            assert again == case and again.name == case.name
    assert (
        registry.ATTENTION.case(dtype="float32", B=1, H=1, Sq=3, Sk=5, D=8, causal=True).name
        == "b1_h1_q3_k5_d8_causal_fp32"
    )


# ------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize(
    "given, name",
    [
        ("float32", "float32"),
        (np.float32, "float32"),
        (np.dtype("float16"), "float16"),
        (ml_dtypes.bfloat16, "bfloat16"),
        (np.dtype(ml_dtypes.bfloat16), "bfloat16"),
        ("torch.bfloat16", "bfloat16"),
        ("dtype('float32')", "float32"),
        (np.int32, "int32"),
    ],
)
def test_dtype_name_of_every_spelling(given, name):
    assert registry.dtype_name(given) == name


def test_dtype_name_of_both_interpreter_front_ends():
    from nki_kernels.sim import language as nl01
    from nki_kernels.sim.nki07 import language as nl07

    for nl in (nl01, nl07):
        assert [registry.dtype_name(d) for d in (nl.float32, nl.float16, nl.bfloat16)] == list(registry.DTYPES)
    assert registry.np_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)


def test_one_copy_of_dtype_name_and_np_dtype():
    from nki_kernels import tolerances
    from nki_kernels.kernels import _checks, _nki07

    assert tolerances.dtype_name is _checks.dtype_name is _nki07.dtype_name is registry.dtype_name
    sources = "".join(p.read_text() for p in (ROOT / "nki_kernels").rglob("*.py"))
    assert sources.count("def dtype_name(") == 1 and sources.count("def np_dtype(") == 1
    assert sources.count("4964") == 1, "the CS149 thresholds are written once, in the registry"


# ------------------------------------------------------------------------- feasibility
@pytest.mark.parametrize(
    "kernel, values, options, message",
    [
        ("conv", (1, 256, 256, 100000, 100000, 3), {}, "GiB of HBM; one trn2 device has 96 GiB"),
        ("conv", (1, 8, 8, 4, 4, 5), {}, "a 5x5 filter for a 4x4 image"),
        ("conv", (1, 3000000, 8, 8, 8, 3), {}, "resident weights per partition"),
        ("conv", (1, 8, 8, 8, 8, 3), {"pool": 5}, "pool_size"),
        ("matmul", (1000000, 1000000, 1000000), {}, "GiB of HBM"),
        ("attention", (1, 1, 128, 256), {}, "D <= 128"),
        ("attention", (1, 1, 100000, 64), {}, "Sk <= 54291 for D = 64 bfloat16"),
        ("matmul", (0, 4, 4), {}, "every size must be an integer >= 1"),
    ],
)
def test_infeasible_shapes_are_rejected_from_their_sizes(kernel, values, options, message, monkeypatch):
    spec = registry.get(kernel)
    case = spec.case_from_cli(values, **options)

    def no_allocation(*a, **k):
        raise AssertionError("the feasibility check allocated inputs")

    monkeypatch.setattr(registry.KernelSpec, "make_inputs", no_allocation)
    with pytest.raises(registry.ShapeError, match=message) as e:
        spec.check_feasible(case)
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{kernel} ")


def test_every_registered_shape_is_feasible():
    for case in registry.all_cases():
        registry.get(case.kernel).check_feasible(case)
    registry.MATMUL.check_feasible(registry.MATMUL.case_from_cli((16384, 16384, 16384)))


def test_arg_shapes_match_the_built_inputs():
    for spec in registry.SPECS:
        case = spec.cases("verify-quick")[0]
        shapes, out_shape, kwargs = spec.arg_shapes(case)
        args, kw = spec.make_inputs(case, seed=3)
        assert tuple(a.shape for a in args) == shapes and kw == kwargs
        assert all(a.dtype == registry.np_dtype(case.dtype) for a in args)
        assert spec.reference(args, kw).shape == out_shape
        again, _ = spec.make_inputs(case, seed=3)
        assert all(np.array_equal(x, y) for x, y in zip(args, again, strict=True))


# ------------------------------------------------------------------------- one source of truth
def _cases(set_name):
    return [(spec, c) for spec in registry.SPECS for c in spec.cases(set_name)]


@pytest.mark.parametrize("quick", [True, False])
def test_verify_enumerates_the_registry_verify_sets(quick):
    from nki_kernels import commands

    set_name = "verify-quick" if quick else "verify"
    groups = [(registry.SPECS[i], registry.SPECS[i].cases(set_name)[j]) for i, j in commands._verify_groups(quick)]
    assert groups == _cases(set_name)  # verify runs each of these in NKI 0.1 and in NKI 0.7


def test_bench_and_profile_enumerate_the_registry():
    from nki_kernels.perf import bench
    from nki_kernels.perf import cli as pcli

    got = [(c.key, c.kernel, c.dtype) for c in bench.cases()]
    want = [
        (key, spec.entry(api), c.dtype)
        for spec, c in _cases("headline")
        for api, key in (("0.1", c.key), ("0.7", f"{c.key}_nki07"))
    ]
    assert got == want
    for spec in registry.SPECS:
        k = pcli._KERNELS[spec.cli_name]
        assert (k.target, k.default_dtype) == (spec.entry_01, spec.default_dtype)
        assert tuple(int(v) for v in k.default_shape.split(",")) == spec.cli_values(spec.default_case())


@pytest.mark.parametrize("shapes", registry.HW_SETS)
@pytest.mark.parametrize("kernels", ["all", "attention,conv2d"])
def test_the_hardware_plan_enumerates_the_registry(shapes, kernels):
    from nki_kernels.hw import run

    opts = run.parse_args(["--shapes", shapes, "--kernels", kernels], {})
    jobs = run.plan(opts, ["0", "1", "2"])
    names = registry.parse_kernels(kernels)
    assert [(j.kind, j.kernel) for j in jobs if j.case is None] == [("hw_tests", k) for k in names]
    assert [j.case for j in jobs if j.case is not None] == registry.select(names, shapes, bench=True)
    assert [j.core for j in jobs] == [str(i % 3) for i in range(len(jobs))]
    opts = run.parse_args(["--shapes", shapes, "--kernels", kernels, "--skip-tests"], {})
    assert all(j.case is not None for j in run.plan(opts, ["0"]))


def test_hardware_tests_enumerate_the_registry_sets(monkeypatch):
    sys.path.insert(0, str(ROOT / "hw_tests"))
    try:
        import hw_support
    finally:
        sys.path.remove(str(ROOT / "hw_tests"))
    for level in registry.HW_SETS:
        monkeypatch.setenv("NKI_HW_SHAPES", level)
        monkeypatch.delenv("NKI_HW_KERNELS", raising=False)
        assert hw_support.selected_cases(bench=True) == registry.select(None, level, bench=True)
        assert hw_support.selected_cases(correctness=True) == registry.select(None, level, correctness=True)


def test_kernel_tests_take_the_cs149_shapes_from_the_registry():
    import test_conv2d

    assert test_conv2d.CS149_SMALL == [c for c in registry.CONV2D.cases("cs149") if c.p["H"] == 32]
    assert len(test_conv2d.CS149_SMALL) == 8
