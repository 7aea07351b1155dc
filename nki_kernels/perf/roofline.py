"""Roofline plot of estimated kernel runs against the NeuronCore roofline (matplotlib optional)."""
from __future__ import annotations

import math
import os

from .hardware import get_hardware


def _require_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError as exc:
        raise RuntimeError("the roofline plot needs matplotlib, an optional extra: "
                           "pip install 'nki-kernels[plot]' (or pip install matplotlib)") from exc


def point_of(label, est) -> dict:
    """A roofline point from an Estimate (or a dict with flops, hbm_bytes, latency_us, mm_dtype)."""
    g = (lambda k: est[k]) if isinstance(est, dict) else (lambda k: getattr(est, k))
    flops, hbm, lat = g("flops"), g("hbm_bytes"), g("latency_us")
    return {"label": label, "flops": flops, "hbm_bytes": hbm, "latency_us": lat,
            "dtype": g("mm_dtype") or "", "ai": flops / hbm if hbm else float("nan"),
            "flops_per_s": flops / (lat * 1e-6) if lat else 0.0}


def plot_roofline(points, path: str, hw="trn2", title: str | None = None) -> str:
    """Write a PNG: BF16/FP32 TensorE ceilings, HBM (716 GB/s) and DMA (368 GB/s) slopes, points."""
    plt = _require_matplotlib()
    hw = get_hardware(hw)
    pts = [p for p in points if p["flops"] > 0 and p["hbm_bytes"] > 0 and p["latency_us"] > 0]
    xs = [p["ai"] for p in pts] or [1.0]
    lo = min(0.1, min(xs) / 3)
    hi = max(1e4, max(xs) * 3)
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    hbm = hw.v("hbm_bw_gbps") * 1e9
    dma = hw.v("dma_bw_gbps") * 1e9
    styles = {"bfloat16": "-", "float32": "--", "float8": ":"}
    for dt, ls in styles.items():
        peak = hw.pe_peak_flops(dt)
        ax.plot(grid, [min(peak, hbm * x) / 1e12 for x in grid], ls, color="black", lw=1.2,
                label=f"roof {dt} {peak / 1e12:.1f} TF/s, HBM {hw.v('hbm_bw_gbps'):.0f} GB/s")
    peak = hw.pe_peak_flops("bfloat16")
    ax.plot(grid, [min(peak, dma * x) / 1e12 for x in grid], "-", color="grey", lw=0.8,
            label=f"DMA cap {hw.v('dma_bw_gbps'):.0f} GB/s")
    for p in pts:
        ax.scatter([p["ai"]], [p["flops_per_s"] / 1e12], s=36, zorder=3)
        ax.annotate(p["label"], (p["ai"], p["flops_per_s"] / 1e12), textcoords="offset points",
                    xytext=(5, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("TFLOP/s (ESTIMATE, cost model)")
    ax.set_title(title or f"{hw.name} NeuronCore roofline — kernel points are cost-model ESTIMATES")
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7, loc="lower right")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
