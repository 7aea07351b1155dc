"""`nki-kernels profile | bench | roofline` as a new user tries them: defaults, usage errors, file names, roofline."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from nki_kernels import cli
from nki_kernels.perf import cli as pcli


def _main(capsys, *argv):
    try:
        code = cli.main(list(argv))
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _record(path):
    with open(path) as f:
        return json.load(f)


# ------------------------------------------------------------------ defaults, usage errors
@pytest.mark.parametrize(
    "argv, stem",
    [
        (["conv"], "conv_1x256x256x224x224x3_fp16_pool1_benchmark_trn2"),
        (["matmul", "--hw", "trn1"], "matmul_2048x2048x2048_bf16_benchmark_trn1"),
        (["attention", "--causal"], "attention_1x1x4096x128_bf16_causal_benchmark_trn2"),
    ],
)
def test_profile_without_shape_uses_the_readme_headline_shape(capsys, tmp_path, argv, stem):
    code, out, err = _main(capsys, "profile", *argv, "--out", str(tmp_path))
    assert code == 0, err
    assert "estimate" in out.lower()
    rec = _record(tmp_path / f"{stem}.json")
    assert np.isfinite(rec["latency_us"]) and rec["latency_us"] > 0
    assert (tmp_path / f"{stem}.trace.json").exists()
    assert sorted(os.listdir(tmp_path)) == [f"{stem}.json", f"{stem}.trace.json"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["profile", "conv", "--shape=-5,1,1,1,1,1"], "every value must be >= 1"),
        (["profile", "conv", "--shape", "1,2,3"], "conv takes 6 values (B,C_in,C_out,H,W,K), got 3"),
        (["profile", "matmul", "--shape", "a,b,c"], "expected comma-separated positive integers"),
        (["profile", "nosuch"], "unknown kernel 'nosuch'; allowed: conv, matmul, attention"),
        (["profile", "vector_add_tiled"], "--shape is required (N[,row_chunk])"),
        (["profile", "matmul", "--pool", "2"], "--pool applies only to conv"),
        (["profile", "conv", "--pool", "0"], "argument --pool: must be >= 1, got 0"),
        (["profile", "conv", "--causal"], "--causal applies only to attention"),
        (["profile", "matmul", "--hw", "trn9"], "--hw 'trn9': unknown hardware"),
        (["profile", "matmul", "--top", "-1"], "argument --top: must be >= 0, got -1"),
        (["profile", "conv", "--shape", "1,8,8,4,4,5"], "filter K=5 is larger than the image 4x4"),
        (["profile", "attention", "--shape", "1,1,128,256"], "got head dim D = 256; allowed: D <= 128"),
        (["profile", "nosuch_module:fn", "--shape", "4"], "no module named 'nosuch_module'"),
        (["profile", "matmul", "--dtype", "int8"], "invalid choice: 'int8'"),
        (["bench", "--only", "nosuch"], "--only 'nosuch' matches no bench case"),
        (["bench", "--hw", "trn1"], "bench estimates trn2 only"),
        (["roofline", "--from", "/nonexistent.json"], "--from '/nonexistent.json': no such file"),
        (["roofline", "--from"], "--from needs at least one JSON record"),
        (["roofline", "--only", "conv999"], "--only 'conv999' matches no bench case"),
    ],
)
def test_every_bad_argument_is_a_one_line_usage_error(capsys, tmp_path, argv, message):
    code, out, err = _main(capsys, *argv)
    assert code == 2, (out, err)
    assert message in err, err
    assert "Traceback" not in err
    assert "tracing " not in err, "rejected after the work started"
    assert len(err.strip().splitlines()) == 1, err


def test_roofline_from_a_file_that_is_not_json(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    code, _, err = _main(capsys, "roofline", "--from", str(bad))
    assert code == 2 and "not a JSON record" in err and err.count("\n") == 1


def test_out_that_is_a_file_is_rejected(capsys, tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    code, _, err = _main(capsys, "profile", "matmul", "--shape", "128,128,128", "--out", str(f))
    assert code == 2 and "exists and is not a directory" in err


# ------------------------------------------------------------------ no collisions
@pytest.mark.parametrize(
    "kernel, shape, variants",
    [
        ("conv", "1,128,128,8,8,3", (["--pool", "1"], ["--pool", "2"])),
        ("attention", "1,1,256,64", ([], ["--causal"])),
        ("matmul", "256,256,256", (["--mode", "benchmark"], ["--mode", "profile"])),
        ("matmul", "256,256,256", (["--dtype", "float32"], ["--dtype", "bfloat16"])),
    ],
)
def test_outputs_of_runs_that_differ_never_share_a_file(capsys, tmp_path, kernel, shape, variants):
    lat = []
    for extra in variants:
        code, _, err = _main(capsys, "profile", kernel, "--shape", shape, *extra, "--out", str(tmp_path))
        assert code == 0, err
        lat.append(sorted(p for p in os.listdir(tmp_path) if not p.endswith(".trace.json")))
    assert len(lat[1]) == 2, f"the second run overwrote the first: {lat}"
    recs = [_record(tmp_path / name) for name in lat[1]]
    assert recs[0]["latency_us"] != recs[1]["latency_us"], "the two variants should estimate differently"


def test_profile_stem_encodes_every_parameter():
    a = pcli.profile_stem("conv", (1, 2, 3, 4, 5, 3), "float16", 2, False, "profile", "trn1")
    assert a == "conv_1x2x3x4x5x3_fp16_pool2_profile_trn1"
    assert pcli.profile_stem("attention", (1, 1, 8, 8), "bfloat16", 1, True, "benchmark", "trn2").endswith(
        "_causal_benchmark_trn2"
    )
    assert pcli.bench_suffix("benchmark", "trn2", ["matmul", "conv224"]) == "benchmark_trn2_only-matmul+conv224"


# ------------------------------------------------------------------ roofline
def test_roofline_reuses_a_fresh_bench_record_and_reruns_a_stale_one(capsys, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
    out = str(tmp_path)
    code, _, err = _main(capsys, "bench", "--only", "conv32x16_fp16", "--out", out)
    assert code == 0, err
    record = tmp_path / "bench_benchmark_trn2_only-conv32x16_fp16.json"
    assert _record(record)["params"] == {"mode": "benchmark", "hw": "trn2", "only": ["conv32x16_fp16"]}

    from nki_kernels.perf import bench

    calls = []
    real = bench.run_bench
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: calls.append(a) or real(*a, **k))
    code, _, err = _main(capsys, "roofline", "--only", "conv32x16_fp16", "--out", out)
    assert code == 0, err
    assert calls == [] and "reusing" in err
    png = tmp_path / "roofline_benchmark_trn2_only-conv32x16_fp16.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    os.utime(record, (1, 1))  # older than the sources: stale
    code, _, err = _main(capsys, "roofline", "--only", "conv32x16_fp16", "--out", out)
    assert code == 0 and len(calls) == 1 and "reusing" not in err
    code, _, err = _main(capsys, "roofline", "--only", "conv32x16_fp16", "--out", out, "--mode", "profile")
    assert code == 0 and len(calls) == 2, "a record of another --mode must not be reused"
    assert (tmp_path / "roofline_profile_trn2_only-conv32x16_fp16.png").exists()


def test_spread_labels_keeps_the_gap_and_the_range():
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 12, 40):
        ys = list(rng.random(n) ** 3)  # clustered near 0
        pos = pcli_spread(ys, 0.05)
        s = sorted(pos)
        gap = min(0.05, 1.0 / max(n - 1, 1))
        assert all(b - a >= gap - 1e-9 for a, b in zip(s, s[1:], strict=False))
        assert all(-1e-9 <= p <= 1 + 1e-9 for p in pos)
        # labels keep the vertical order of their points
        assert [i for i, _ in sorted(enumerate(ys), key=lambda t: t[1])] == [
            i for i, _ in sorted(enumerate(pos), key=lambda t: t[1])
        ]


def pcli_spread(ys, gap):
    from nki_kernels.perf.roofline import spread_labels

    return spread_labels(ys, gap)


def test_roofline_labels_never_overlap_even_for_coincident_points():
    pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
    from nki_kernels.perf.roofline import roofline_figure

    # The overlaps the issue saw: conv 224 fp16 next to matmul 4096, conv 224 fp32 next to conv
    # 32x16 fp16 -- here made worse: several points at exactly the same place.
    pts = []
    for k, (ai, tf) in enumerate(
        [
            (600, 75),
            (600, 75),
            (610, 76),
            (1000, 75),
            (300, 18),
            (310, 18.5),
            (150, 10),
            (2000, 45),
            (1100, 33),
            (600, 75),
            (900, 19),
            (580, 19.5),
        ]
    ):
        flops = 1e9 * (k + 1)
        pts.append(
            {
                "label": f"kernel number {k}",
                "flops": flops,
                "hbm_bytes": flops / ai,
                "latency_us": flops / (tf * 1e12) * 1e6,
                "dtype": "",
                "ai": ai,
                "flops_per_s": tf * 1e12,
            }
        )
    fig, ax, texts = roofline_figure(pts)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(t, renderer) for t in texts]  # the text only, not its leader line
    assert len(boxes) == len(pts)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
    fig_box = fig.bbox
    assert all(b.x1 <= fig_box.x1 and b.y0 >= fig_box.y0 and b.y1 <= fig_box.y1 for b in boxes), "label off the image"
    import matplotlib.pyplot as plt

    plt.close(fig)
