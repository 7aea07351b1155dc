"""Roofline plot of estimated kernel runs against the NeuronCore roofline (matplotlib optional)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .hardware import HardwareSpec, get_hardware

if TYPE_CHECKING:
    from .model import Estimate


def _require_matplotlib():
    try:
        import matplotlib  # an optional extra ([plot]): imported only when a plot is drawn

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError as exc:
        raise RuntimeError(
            "the roofline plot needs matplotlib, an optional extra: "
            "pip install 'nki-kernels[plot]' (or pip install matplotlib)"
        ) from exc


def point_of(label: str, est: Estimate | dict) -> dict:
    """A roofline point from an Estimate (or a dict with flops, hbm_bytes, latency_us, mm_dtype)."""
    g = (lambda k: est[k]) if isinstance(est, dict) else (lambda k: getattr(est, k))
    flops, hbm, lat = g("flops"), g("hbm_bytes"), g("latency_us")
    return {
        "label": label,
        "flops": flops,
        "hbm_bytes": hbm,
        "latency_us": lat,
        "dtype": g("mm_dtype") or "",
        "ai": flops / hbm if hbm else float("nan"),
        "flops_per_s": flops / (lat * 1e-6) if lat else 0.0,
    }


def spread_labels(ys: Sequence[float], gap: float, lo: float = 0.0, hi: float = 1.0) -> list:
    """Label positions near the wanted ``ys`` (any order), at least ``gap`` apart, within [lo, hi].

    Three passes over the labels sorted by wanted position: push apart upwards, then pull down
    under ``hi``, then push up above ``lo``; each keeps the gaps.  When ``len(ys) * gap``
    exceeds the room the gap shrinks to fit (the caller then shrinks the font).  Returns the
    positions in the order of ``ys``; the labels keep the vertical order of their points.
    """
    n = len(ys)
    if n == 0:
        return []
    gap = min(gap, (hi - lo) / max(n - 1, 1))
    order = sorted(range(n), key=lambda i: ys[i])
    pos = [min(max(float(ys[i]), lo), hi) for i in range(n)]
    for prev, i in pairwise(order):
        pos[i] = max(pos[i], pos[prev] + gap)
    pos[order[-1]] = min(pos[order[-1]], hi)
    for nxt, i in pairwise(order[::-1]):
        pos[i] = min(pos[i], pos[nxt] - gap)
    pos[order[0]] = max(pos[order[0]], lo)
    for prev, i in pairwise(order):
        pos[i] = max(pos[i], pos[prev] + gap)
    return pos


def roofline_figure(
    points: Sequence[dict], hw: HardwareSpec | str = "trn2", title: str | None = None
) -> tuple[Any, Any, list]:
    """The roofline figure: ``(fig, ax, label_texts)``.

    Point labels sit in a column right of the plot, each joined to its point by a leader line
    and spaced at least one text line apart, so they never overlap whatever the points are.
    """
    plt = _require_matplotlib()
    hw = get_hardware(hw)
    pts = [p for p in points if p["flops"] > 0 and p["hbm_bytes"] > 0 and p["latency_us"] > 0]
    xs = [p["ai"] for p in pts] or [1.0]
    lo = min(0.1, min(xs) / 3)
    hi = max(1e4, max(xs) * 3)
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    fig = plt.figure(figsize=(10.5, 5.6), dpi=110)
    ax = fig.add_axes([0.08, 0.25, 0.56, 0.67])
    hbm = hw.v("hbm_bw_gbps") * 1e9
    dma = hw.v("dma_bw_gbps") * 1e9
    styles = {"bfloat16": "-", "float32": "--", "float8": ":"}
    for dt, ls in styles.items():
        peak = hw.pe_peak_flops(dt)
        ax.plot(
            grid,
            [min(peak, hbm * x) / 1e12 for x in grid],
            ls,
            color="black",
            lw=1.2,
            label=f"roof {dt} {peak / 1e12:.1f} TF/s, HBM {hw.v('hbm_bw_gbps'):.0f} GB/s",
        )
    peak = hw.pe_peak_flops("bfloat16")
    ax.plot(
        grid,
        [min(peak, dma * x) / 1e12 for x in grid],
        "-",
        color="grey",
        lw=0.8,
        label=f"DMA cap {hw.v('dma_bw_gbps'):.0f} GB/s",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("TFLOP/s (ESTIMATE, cost model)")
    ax.set_title(title or f"{hw.name} NeuronCore roofline — kernel points are cost-model ESTIMATES", fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for k, p in enumerate(pts):
        ax.scatter([p["ai"]], [p["flops_per_s"] / 1e12], s=30, zorder=3, color=colors[k % len(colors)])
    ax.set_xlim(lo, hi)
    ys = [p["flops_per_s"] / 1e12 for p in pts]
    if ys:
        ymin, ymax = ax.get_ylim()
        ax.set_ylim(min(ymin, min(ys) / 2), max(ymax, max(ys) * 2))
    fig.canvas.draw()  # fixes the transforms used below
    height_px = ax.get_window_extent().height
    fontsize = 7.0
    line = 1.6 * fontsize * fig.dpi / 72 / height_px  # one text line, in axes fraction
    to_axes = ax.transAxes.inverted()
    wanted = [to_axes.transform(ax.transData.transform((p["ai"], y)))[1] for p, y in zip(pts, ys, strict=True)]
    if len(pts) * line > 1.0:
        fontsize *= 1.0 / (len(pts) * line)
        line = 1.0 / len(pts)
    pos = spread_labels(wanted, line)
    texts = []
    for k, (p, y, ty) in enumerate(zip(pts, ys, pos, strict=True)):
        texts.append(
            ax.annotate(
                f"{p['label']}  {p['latency_us']:,.1f} us (est.)",
                xy=(p["ai"], y),
                xycoords="data",
                xytext=(1.04, ty),
                textcoords="axes fraction",
                va="center",
                ha="left",
                fontsize=fontsize,
                annotation_clip=False,
                arrowprops={"arrowstyle": "-", "lw": 0.6, "color": colors[k % len(colors)], "shrinkA": 0, "shrinkB": 3},
            )
        )
    return fig, ax, texts


def plot_roofline(points: Sequence[dict], path: str, hw: HardwareSpec | str = "trn2", title: str | None = None) -> str:
    """Write a PNG: BF16/FP32 TensorE ceilings, HBM (716 GB/s) and DMA (368 GB/s) slopes, points."""
    fig, _, _ = roofline_figure(points, hw=hw, title=title)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    _require_matplotlib().close(fig)
    return path
