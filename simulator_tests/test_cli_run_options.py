"""`nki-kernels run` check flags (--strict, --shuffle, --no-poison, --precision) and strict
parsing of NKI_SIM_OPTIONS."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from nki_kernels.sim import options as opt

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    from nki_kernels.sim.options import default_options

    @nki.jit
    def partial(a):          # writes 4 of 8 columns, returns all 8: the rest is uninitialised
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:4], nl.load(a))
        return out

    @nki.jit
    def carried(a):          # a loop-carried dependency inside affine_range
        out = nl.ndarray((1, 8), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 1), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(8):
            acc = nl.add(nl.multiply(acc, 2.0), nl.load(a[0:1, i:i + 1]))
            nl.store(out[0:1, i:i + 1], acc)
        return out

    o = default_options()
    p = nki.simulate_kernel(partial, np.ones((128, 4), np.float32))
    # reading `acc` from an earlier iteration is E027 under strict (docs/nki-0.1-rules.md §11.5): run it
    # with the flags' options but strict off, to see what --shuffle does to its order
    c = nki.simulate_kernel(carried, np.arange(8, dtype=np.float32).reshape(1, 8), options=o.replace(strict=False))
    print(json.dumps({"strict": o.strict, "seed": o.shuffle_affine_seed, "poison": o.poison,
                      "precision": o.precision, "nan_in_unwritten": bool(np.isnan(p[:, 4:]).all()),
                      "carried": c.ravel().tolist(), "argv": sys.argv[1:]}))
""")


def _run(tmp_path, *flags, env_options=None, script_args=()):
    (tmp_path / "k.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "NKI_SIM_OPTIONS"}
    if env_options is not None:
        env["NKI_SIM_OPTIONS"] = env_options
    return subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", *flags, "k.py", *script_args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _result(proc):
    import json

    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_run_defaults_poison_and_keeps_order(tmp_path):
    r = _result(_run(tmp_path, script_args=("--flag-for-the-script",)))
    assert r["poison"] and r["nan_in_unwritten"] and r["seed"] is None and not r["strict"]
    in_order = [0.0]
    for i in range(1, 8):
        in_order.append(in_order[-1] * 2 + i)
    assert r["carried"] == in_order
    assert r["argv"] == ["--flag-for-the-script"]  # flags after FILE belong to the script
    assert r["precision"] == "compat"  # third-party code: the simulator's numerics


def test_run_precision_hw_overrides_the_alias_default(tmp_path):
    assert _result(_run(tmp_path, "--precision", "hw"))["precision"] == "hw"


def test_run_flags_map_onto_sim_options(tmp_path):
    r = _result(_run(tmp_path, "--strict", "--shuffle", "3", "--no-poison", "--precision", "compat"))
    assert (r["strict"], r["seed"], r["poison"], r["precision"]) == (True, 3, False, "compat")
    assert not r["nan_in_unwritten"]  # --no-poison: unwritten memory reads as 0
    base = _result(_run(tmp_path))
    assert r["carried"] != base["carried"], "--shuffle did not change the affine_range order"


def test_run_flags_override_the_environment(tmp_path):
    r = _result(_run(tmp_path, "--shuffle", "5", env_options="poison=0,shuffle_affine_seed=1"))
    assert (r["poison"], r["seed"]) == (False, 5)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--precision", "exact"], "invalid choice: 'exact'"),
        (["--shuffle", "x"], "argument --shuffle: expected an integer >= 0, got 'x'"),
    ],
)
def test_run_bad_flags_are_usage_errors(tmp_path, flags, message):
    proc = _run(tmp_path, *flags)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "spec, message",
    [
        ("poison", "option 'poison' needs a value"),
        ("poison=maybe", "poison='maybe' is not a boolean; allowed: 1, true, yes, on (true) or 0, false, no, off"),
        ("trace=2", "trace='2' is not a boolean"),
        ("shuffle_affine_seed=abc", "shuffle_affine_seed must be an integer >= 0 or none"),
        ("posion=1", "unknown option 'posion'"),
    ],
)
def test_nki_sim_options_rejects_anything_unclear(monkeypatch, tmp_path, spec, message):
    monkeypatch.setenv("NKI_SIM_OPTIONS", spec)
    with pytest.raises(ValueError, match="NKI_SIM_OPTIONS") as e:
        opt._from_env()
    assert message in str(e.value)
    proc = _run(tmp_path, env_options=spec)  # the CLI: one line, exit 2, before any work
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and message in proc.stderr


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("poison=off", False),
        ("poison=ON", True),
        ("poison=no", False),
        ("poison=Yes", True),
        ("poison=0", False),
        ("poison=true", True),
        (" poison = false , ", False),
    ],
)
def test_nki_sim_options_accepts_the_documented_booleans(monkeypatch, spec, expected):
    monkeypatch.setenv("NKI_SIM_OPTIONS", spec)
    assert opt._from_env().poison is expected


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("2", "2")])
def test_run_uses_one_blas_thread_unless_the_user_sets_it(tmp_path, given, seen):
    """The CLI defaults OPENBLAS_NUM_THREADS to 1 before NumPy loads (the interpreter's GEMMs are one small
    instruction each; a second BLAS thread cost CPU), and keeps a value the user set."""
    (tmp_path / "blas.py").write_text("import os\nprint(os.environ.get('OPENBLAS_NUM_THREADS'))\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    proc = subprocess.run(
        [sys.executable, "-m", "nki_kernels.cli", "run", "blas.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == seen


@pytest.mark.parametrize(("given", "applied"), [(None, sys.platform.startswith("linux")), ("65536", False)])
def test_run_lets_malloc_reuse_large_buffers_unless_the_user_chose(given, applied):
    """`run` raises glibc's mmap threshold (NumPy's large temporaries reused instead of mapped and faulted in anew:
    the CS149 part 2 harness's page faults), except where the user set MALLOC_MMAP_THRESHOLD_ or off Linux.  In a
    subprocess: the setting is the process's."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    if given is not None:
        env["MALLOC_MMAP_THRESHOLD_"] = given
    code = "from nki_kernels.commands import _reuse_large_buffers; print(_reuse_large_buffers())"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(applied)
