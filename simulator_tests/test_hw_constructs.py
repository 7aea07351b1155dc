"""hw_tests/test_constructs.py (the first-hardware-run smoke test) exercised off-device: every
construct kernel runs through the interpreter (strict) against its NumPy reference, the
report names the construct and how to avoid it, and the hardware file is collected and
skipped with its reason, or run through the fake SDK's ``nki.baremetal`` (scripts/fakes)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

from nki_kernels.sim import SimOptions, SimWarning, simulate_kernel

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILE = ROOT / "hw_tests" / "test_constructs.py"
FAKES = ROOT / "scripts" / "fakes"


def _module():
    spec = importlib.util.spec_from_file_location("hw_test_constructs", FILE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


MOD = _module()


@pytest.mark.parametrize("construct", MOD.CONSTRUCTS, ids=[c.name for c in MOD.CONSTRUCTS])
def test_construct_kernel_matches_numpy_in_interpreter(construct):
    """The smoke kernels themselves are right (so a hardware failure is the construct's).
    Strict mode, except for constructs used only behind an off-by-default flag: strict
    rejects exactly those (E024), which is checked too."""
    if construct.flag_only:
        with pytest.raises(AssertionError, match="E024"):
            MOD.check_construct(construct, lambda k, *a: simulate_kernel(k, *a, options=SimOptions(strict=True)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SimWarning)
            MOD.check_construct(construct, lambda k, *a: simulate_kernel(k, *a, options=SimOptions(strict=False)))
        return
    MOD.check_construct(construct, lambda k, *a: simulate_kernel(k, *a, options=SimOptions(strict=True)))


def test_every_construct_is_listed_in_the_docstring():
    for c in MOD.CONSTRUCTS:
        assert c.name in MOD.__doc__, c.name
        assert c.relied_on_by and c.avoid


def test_failure_report_names_construct_kernel_and_flag():
    c = next(c for c in MOD.CONSTRUCTS if c.name == "dma_transpose_3d")

    def broken_device(kernel, *args):
        return np.zeros((128, 8, 128), np.float32) + 1.0  # wrong values

    with pytest.raises(AssertionError, match=r"CONSTRUCT FAILED: dma_transpose_3d .*USE_DMA_TRANSPOSE"):
        MOD.check_construct(c, broken_device)

    def compile_error(kernel, *args):
        raise RuntimeError("[NCC_XXX] unsupported access pattern")

    with pytest.raises(AssertionError, match=r"pool_psum_two_reduces .*RuntimeError.*unsupported access pattern"):
        MOD.check_construct(MOD.CONSTRUCTS[0], compile_error)


def _pytest(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(FILE), "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_collected_and_skipped_with_reason_off_device():
    env = dict(os.environ, NKI_BACKEND="sim")
    r = _pytest(env, "-rs")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(MOD.CONSTRUCTS)} skipped" in r.stdout, r.stdout
    assert "NKI_BACKEND=sim" in r.stdout and "no Neuron device" in r.stdout, r.stdout


def test_device_path_through_the_fake_sdk():
    """The on-device test body with the fake SDK's nki.baremetal (which calls the kernel
    directly; the kernels run in the interpreter): every construct passes and the results are
    checked by the project's one assert_close."""
    sdk, tests = str(FAKES / "sdk"), str(ROOT / "hw_tests")
    code = (
        f"import sys, numpy as np; sys.path.insert(0, {sdk!r}); sys.path.insert(0, {tests!r})\n"
        "import importlib.util as u\n"
        f"s = u.spec_from_file_location('c', {str(FILE)!r}); m = u.module_from_spec(s); sys.modules['c'] = m\n"
        "s.loader.exec_module(m)\n"
        "from nki_kernels.hw import device\n"
        "for c in m.CONSTRUCTS: m.check_construct(c, device.run_baremetal)\n"
        "print('ok', len(m.CONSTRUCTS))\n"
    )
    env = dict(os.environ, NKI_BACKEND="sim")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ok {len(MOD.CONSTRUCTS)}" in r.stdout
