"""`nki-kernels bench --peers PATH ...`: public kernels beside ours (nki_kernels/perf/peers.py).

The checkouts here are fakes written for these tests in tmp_path: tiny kernels of our own at the
paths the peer registry names (no peer code), small shapes through ``peers.headline_cases``.
"""

from __future__ import annotations

import json
import math
import os
import textwrap

import pytest
from cli_testing import assert_usage_error, run_main

from nki_kernels.kernels import registry
from nki_kernels.perf import bench, peers

_ATTN_LIB = """\
import nki
import nki.isa as nisa
import nki.language as nl

from ..utils.helpers import first_tile


@nki.jit
def attention_cte(q, k, v, scale=1.0, causal_mask=True, tp_q=True, tp_k=False, tp_out=False):
    out = nl.ndarray(v.shape, v.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), v.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 128), v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=first_tile(v))
    nisa.dma_transpose(dst=u, src=t)
    nisa.dma_copy(dst=first_tile(out), src=u)
    return out
"""

_HELPERS = """\
def first_tile(a):
    return a[0, 0:128, 0:128]
"""

_MATMUL_SAMPLES = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def nki_matmul_fully_optimized_(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((K, M), lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((K, N), rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray((M, N), lhsT.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out
"""

# A kernel the interpreter rejects: the copy's source and destination differ in shape.
_BROKEN_ATTN_SAMPLES = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def attn_fwd_v11(q, k, v):
    t = nl.ndarray((128, 64), q.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=q)
    return q
"""


def _write(root, rel, text=""):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))


def _fake_library(tmp_path):
    lib = str(tmp_path / "nki-library")
    for pkg in ("src/nkilib_src", "src/nkilib_src/nkilib", "src/nkilib_src/nkilib/core"):
        _write(lib, f"{pkg}/__init__.py")
    _write(lib, "src/nkilib_src/nkilib/core/attention/__init__.py")
    _write(lib, "src/nkilib_src/nkilib/core/utils/__init__.py")
    _write(lib, "src/nkilib_src/nkilib/core/utils/helpers.py", _HELPERS)
    _write(lib, "src/nkilib_src/nkilib/core/attention/attention_cte.py", _ATTN_LIB)
    return lib


def _fake_samples(tmp_path):
    smp = str(tmp_path / "nki-samples")
    mm = "src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py"
    _write(smp, mm, _MATMUL_SAMPLES)
    _write(smp, "src/nki_samples/tutorials/attention_fwd_performance/attention_kernels.py", _BROKEN_ATTN_SAMPLES)
    return smp  # no contributed/ and no reference/: those peers are "not found"


def _small_cases():
    attn = registry.get("attention").cases("headline")
    mm = registry.get("matmul").cases("headline")[0]
    small_attn = (("B", 1), ("H", 1), ("Sq", 128), ("Sk", 128), ("D", 128))
    return [
        registry.Case("attention", small_attn + (("causal", False),), "bfloat16", key=attn[0].key),
        registry.Case("attention", small_attn + (("causal", True),), "bfloat16", key=attn[1].key),
        registry.Case("matmul", (("K", 128), ("M", 128), ("N", 512)), "bfloat16", key=mm.key),
    ]


def _by(rows, peer_key, case_key):
    return next(r for r in rows if r.peer.key == peer_key and r.case_key == case_key)


def _finite_positive(est):
    assert math.isfinite(est.latency_us) and est.latency_us > 0
    assert est.n_events > 0


def test_checkouts_are_recognised_and_commits_reported(tmp_path):
    lib, smp = _fake_library(tmp_path), _fake_samples(tmp_path)
    cos = peers.check_peers([lib, smp])
    assert [(c.kind, c.path) for c in cos] == [("nki-library", lib), ("nki-samples", smp)]
    # tmp_path is not a git work tree of its own: never another repository's commit
    assert all(c.commit == "no git metadata" for c in cos)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t: str(t / "nosuch"), "no such directory"),
        (lambda t: (t / "f.txt").write_text("x") and str(t / "f.txt"), "is not a directory"),
        (lambda t: (t / "empty").mkdir() or str(t / "empty"), "neither an nki-library nor an nki-samples checkout"),
    ],
)
def test_bad_peer_paths_are_usage_errors_before_any_work(tmp_path, capsys, monkeypatch, make, message):
    path = make(tmp_path)
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("bench ran before --peers was checked"))
    code, out, err = run_main(capsys, ["bench", "--peers", path, "--out", str(tmp_path / "o")])
    assert_usage_error(code, out, err, message)
    if message.startswith("neither"):  # says what a checkout of each kind has
        assert "src/nkilib_src/nkilib/" in err and "src/nki_samples/" in err


def test_two_checkouts_of_one_kind_are_rejected(tmp_path):
    lib = _fake_library(tmp_path)
    other = tmp_path / "copy"
    (other / "src/nkilib_src/nkilib").mkdir(parents=True)
    with pytest.raises(peers.UsageError, match="two nki-library checkouts"):
        peers.check_peers([lib, str(other)])


def test_peers_without_a_path_is_a_usage_error(capsys):
    code, out, err = run_main(capsys, ["bench", "--peers"])
    assert code == 2 and "--peers" in err


def test_peer_rows_ok_missing_error_not_applicable_and_sensitivity(tmp_path):
    cos = peers.check_peers([_fake_library(tmp_path), _fake_samples(tmp_path)])
    rows = peers.run_peers(cos, progress=None, cases=_small_cases())
    attn, causal, mm = (c.key for c in _small_cases())

    cte = _by(rows, "attention_cte", attn)
    assert cte.status == "ok", cte.message
    _finite_positive(cte.est)
    # its SBUF->SBUF dma_transpose: estimated again at the other end of the uncalibrated range, slower
    (const, val, lat), *_ = cte.sensitivity
    assert const == "dma_transpose_eff_sbuf" and val == peers.UNCALIBRATED[const].other
    assert lat > cte.est.latency_us

    mmrow = _by(rows, "nki_matmul_fully_optimized", mm)
    assert mmrow.status == "ok", mmrow.message
    _finite_positive(mmrow.est)
    assert mmrow.sensitivity == []  # no DMA transpose: nothing uncalibrated to show
    assert 0 < peers.job_mfu(mmrow.est, mmrow.job_flops, "bfloat16") < 1

    broken = _by(rows, "attn_fwd_v11", attn)
    assert broken.status == "error" and "\n" not in broken.message
    assert broken.message.startswith("running on the interpreter: ")
    assert _by(rows, "attn_fwd_v11", causal).status == "not applicable"  # the tutorial has no causal mask

    missing = _by(rows, "contributed_matmul", mm)
    assert (
        missing.status == "not found" and cos[1].path in missing.message and "contributed/matmul.py" in missing.message
    )

    text = peers.render_peers(rows, [], cos)
    lines = text.splitlines()
    assert any("attention_cte" in ln and "\u2020" in ln for ln in lines)
    assert any("at dma_transpose_eff_sbuf = 0.25" in ln for ln in lines)
    assert any("contributed matmul" in ln and "not found in" in ln for ln in lines)
    assert any("attn_fwd_v11" in ln and "error:" in ln for ln in lines)
    assert "no git metadata" in lines[0]


def test_no_checkout_of_a_kind_gives_rows_not_a_crash(tmp_path):
    cos = peers.check_peers([_fake_library(tmp_path)])
    rows = peers.run_peers(cos, progress=None, cases=_small_cases()[2:])  # matmul: nki-samples peers only
    assert rows and all(r.status == "no checkout" for r in rows)
    assert "no nki-samples checkout given" in peers.render_peers(rows, [], cos)


def test_peer_modules_do_not_outlive_the_run(tmp_path):
    import sys

    cos = peers.check_peers([_fake_library(tmp_path)])
    peers.run_peers(cos, progress=None, cases=_small_cases()[:1])
    assert not [n for n in sys.modules if n.startswith("nkilib_src")]
    assert str(tmp_path) not in " ".join(sys.path)


def test_cli_bench_with_peers_prints_the_section_and_records_it(tmp_path, capsys, monkeypatch):
    lib, smp = _fake_library(tmp_path), _fake_samples(tmp_path)
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: [])  # ours are not under test here (slow)
    monkeypatch.setattr(peers, "headline_cases", _small_cases)
    out_dir = tmp_path / "out"
    code, out, err = run_main(capsys, ["bench", "--only", "matmul", "--peers", lib, smp, "--out", str(out_dir)])
    assert code == 0, err
    assert f"nki-library {lib} @ no git metadata" in out and f"nki-samples {smp} @ no git metadata" in out
    assert "nki-samples tutorial nki_matmul_fully_optimized_" in out
    assert "attention_cte" not in out  # --only matmul
    rec = json.loads((out_dir / "bench_benchmark_trn2_only-matmul_peers.json").read_text())
    ok = [r for r in rec["peers"]["rows"] if r["status"] == "ok"]
    assert ok and all(r["estimate"]["latency_us"] > 0 for r in ok)
    assert rec["params"]["peers"] == [lib, smp]


def test_bench_without_peers_has_no_peer_section(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: [])
    code, out, err = run_main(capsys, ["bench", "--only", "matmul", "--out", str(tmp_path)])
    assert code == 0, err
    assert "Peers" not in out
    assert (tmp_path / "bench_benchmark_trn2_only-matmul.json").exists()
