"""Latency on a NeuronCore with nki.benchmark, recorded to JSON; thresholds reported, not asserted."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from hw_support import case_ids, selected_cases
from nki_kernels.hw import job

pytestmark = pytest.mark.hardware

BENCH = selected_cases(bench=True)
WARMUP = int(os.environ.get("NKI_HW_WARMUP", "10"))
ITERS = int(os.environ.get("NKI_HW_ITERS", "100"))


@pytest.mark.parametrize("case", BENCH, ids=case_ids(BENCH))
def test_benchmark_recorded(case, results_dir, record_property):
    out_dir = results_dir / case.kernel / case.name
    # Cost-model estimate first (CPU, interpreter backend, separate process); optional.
    est = subprocess.run(
        [
            sys.executable,
            "-m",
            "nki_kernels.hw.job",
            "estimate",
            "--kernel",
            case.kernel,
            "--case",
            case.name,
            "--out",
            str(out_dir),
        ],
        env=dict(os.environ, NKI_BACKEND="sim"),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if est.returncode != 0:
        print(f"no estimate for {case.case_id}: {est.stderr.strip()[-300:]}")
    rec = job.bench_case(case, str(out_dir), warmup=WARMUP, iters=ITERS)
    lat = rec["latency_us"]
    assert all(math.isfinite(v) and v > 0 for v in lat.values()), f"bad latencies {lat}"
    assert lat["p0"] <= lat["p50"] <= lat["p99"] <= lat["p100"], f"percentiles out of order: {lat}"
    for key in ("p50_us", "p99_us", "warmup", "iters", "core"):
        record_property(key, rec[key])
    cs, vs = rec["cs149"], rec["vs_estimate"]
    print(
        f"{case.case_id}: p50 {rec['p50_us']:.1f} us, p99 {rec['p99_us']:.1f} us"
        + (f"; CS149 {cs['verdict']} ({cs['optimized_us']} us)" if cs else "")
        + (f"; measured/estimate p50 {vs['ratio_p50']:.2f}" if vs and "ratio_p50" in vs else "")
    )
