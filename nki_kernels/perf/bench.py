"""The headline table (``nki-kernels bench``): cost-model ESTIMATES of the project's kernels
next to the physical limit (trn2-hardware.md §5), the kernel registry's goal and, for the conv, the
CS149 reference latency.  A kernel whose module is not importable yet is reported as such.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from nki_kernels.kernels import registry

from . import accuracy
from . import limits as L
from .labels import ESTIMATE_LABEL
from .model import estimate
from .report import BANNER


def _arr(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 1.0) -> np.ndarray:
    """Seeded normal inputs (the calibration kernels' inputs, ``perf/cli.py``)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(registry.np_dtype(dtype))


@dataclass
class BenchCase:
    key: str
    label: str
    kernel: str  # "module:function"
    make_args: Callable[[], tuple[tuple, dict]]
    dtype: str
    goal: str
    check: Callable[[Any], bool] | None
    limits: dict
    reference_us: float | None = None
    reference_note: str = ""
    lesson: dict = field(default_factory=dict)
    goal_value: float | None = None  # the registry goal's number (the causal ratio is judged in run_bench)


def _bench_case(case: registry.Case) -> BenchCase:
    """A headline case of the kernel registry as a row of the table."""
    spec, p, dt, goal = registry.get(case.kernel), case.p, case.dtype, case.goal
    assert goal is not None, f"headline case {case.key} has no goal"
    check = {
        "latency_us": lambda e, g=goal.value: e.latency_us <= g,
        "mfu_pct": lambda e, g=goal.value: 100 * e.mfu >= g,
    }.get(goal.kind)
    row: dict[str, Any] = {
        "key": case.key,
        "kernel": spec.entry_01,
        "make_args": lambda: spec.make_inputs(case),
        "dtype": dt,
        "goal": goal.text,
        "check": check,
        "goal_value": goal.value,
    }
    if case.kernel == "conv2d":
        B, C_in, C_out, H, W, K, pool = (p[n] for n in ("B", "C_in", "C_out", "H", "W", "K", "pool_size"))
        thresholds = case.cs149_thresholds_us
        return BenchCase(
            label=f"conv B{B} {C_in}->{C_out} {K}x{K} {H}x{W} pool {pool} {dt}",
            limits=L.conv_limits(B, C_in, C_out, H, W, K, pool, dt),
            reference_us=thresholds[1] if thresholds else None,
            reference_note="CS149 reference (trn2 hardware, §3 #14-16)" if thresholds else "",
            lesson={"conv_fusion": L.conv_unfused_traffic(B, C_in, C_out, H, W, K, pool, dt)},
            **row,
        )
    if case.kernel == "matmul":
        K, M, N = p["K"], p["M"], p["N"]
        size = f"{K}^3" if K == M == N else f"{M}x{K}x{N}"
        return BenchCase(label=f"matmul {size} {dt}", limits=L.matmul_limits(M, K, N, dt), **row)
    B, H, S, D, causal = p["B"], p["H"], p["Sq"], p["D"], p["causal"]
    return BenchCase(
        label=f"attention B{B} H{H} S{S} D{D} {'causal' if causal else 'non-causal'} {dt}",
        limits=L.attention_limits(B, H, S, D, causal, dt),
        lesson={"attention_naive": L.attention_naive_traffic(B, H, S, D, causal, dt)},
        **row,
    )


def cases() -> list[BenchCase]:
    """Every headline case of the kernel registry, each followed by its NKI 0.7 twin (key ``*_nki07``)."""
    out = []
    for spec in registry.SPECS:
        for case in spec.cases("headline"):
            c = _bench_case(case)
            out += [c, dataclasses.replace(c, key=f"{c.key}_nki07", label=f"{c.label} [NKI 0.7]", kernel=spec.entry_07)]
    return out


def _load(path):
    mod, fn = path.split(":")
    return getattr(importlib.import_module(mod), fn)


@dataclass
class BenchRow:
    case: BenchCase
    status: str  # "ok" | "unavailable" | "error"
    message: str = ""
    est: Any = None  # the Estimate when status == "ok"
    seconds: float = 0.0
    goal_met: bool | None = None


def run_bench(
    selected: Sequence[str] | None = None,
    progress: IO[str] | None = sys.stderr,
    numerics: bool = False,
    trace_dir: str | None = None,
    mode: str = "benchmark",
) -> list:
    rows = []
    all_cases = [c for c in cases() if not selected or any(s in c.key for s in selected)]
    for k, c in enumerate(all_cases):
        if progress:
            print(f"[{k + 1}/{len(all_cases)}] {c.label}: tracing and scheduling ...", file=progress, flush=True)
        try:
            kern = _load(c.kernel)
        except (ImportError, AttributeError) as exc:
            rows.append(BenchRow(c, "unavailable", f"kernel not available yet ({exc})"))
            continue
        t = time.perf_counter()
        try:
            args, kwargs = c.make_args()
            est = estimate(kern, *args, numerics=numerics, mode=mode, **kwargs)
        except Exception as exc:  # report and continue: one broken kernel must not hide the table
            rows.append(BenchRow(c, "error", f"{type(exc).__name__}: {exc}"[:300], seconds=time.perf_counter() - t))
            continue
        row = BenchRow(c, "ok", est=est, seconds=time.perf_counter() - t)
        if c.check is not None:
            row.goal_met = bool(c.check(est))
        if trace_dir:
            est.write_chrome_trace(f"{trace_dir}/{c.key}.trace.json")
        rows.append(row)
        if progress:
            print(
                f"      {accuracy.band_text(est)} ({ESTIMATE_LABEL}) in {row.seconds:.1f} s "
                f"({est.n_events} instructions)",
                file=progress,
                flush=True,
            )
    # causal <= the registry's ratio x non-causal
    by = {r.case.key: r for r in rows}
    for suffix in ("", "_nki07"):
        nc, ca = by.get(f"attn4096_bf16{suffix}"), by.get(f"attn4096_bf16_causal{suffix}")
        if nc and ca and nc.status == ca.status == "ok":
            ratio = ca.est.latency_us / nc.est.latency_us
            ca.goal_met = ratio <= ca.case.goal_value
            ca.message = f"causal/non-causal = {ratio:.2f}"
    return rows


def render(rows: Sequence[BenchRow]) -> str:
    out = [
        BANNER,
        "",
        f"{'kernel':52s} {'estimate us':>12s} {'band':>5s} {'MFU est':>8s} {'limit us':>9s} {'bound':>13s} "
        f"{'ref us':>7s} {'goal':>20s} {'met':>4s}",
    ]
    warnings: list[str] = []
    for r in rows:
        c = r.case
        lim = f"{c.limits['limit_us']:9.1f}"
        bound = c.limits["bound_by"].replace("_us", "")
        ref = f"{c.reference_us:7.0f}" if c.reference_us else f"{'-':>7s}"
        if r.status != "ok":
            out.append(
                f"{c.label:52s} {'-':>12s} {'-':>5s} {'-':>8s} {lim} {bound:>13s} {ref} {c.goal:>20s} {'-':>4s}"
                f"   {r.message}"
            )
            continue
        e = r.est
        mfu = f"{100 * e.mfu:7.1f}%" if e.matmul_flops else f"{'-':>8s}"
        met = {True: "yes", False: "NO", None: "-"}[r.goal_met]
        band = f"\u00b1{100 * accuracy.typical_error(e):.0f}%"
        out.append(
            f"{c.label:52s} {e.latency_us:12.1f} {band:>5s} {mfu} {lim} {bound:>13s} {ref} {c.goal:>20s} "
            f"{met:>4s}" + (f"   {r.message}" if r.message else "")
        )
        warnings.extend(f"  {c.label}: {w}" for w in accuracy.warnings(e))
    out.append("")
    classes = ", ".join(
        f"{k} \u00b1{100 * b.typical:.0f} % (worst {b.worst:.2f}x)" for k, b in accuracy.CLASS_BANDS.items()
    )
    out.append(
        f"estimate = cost-model estimate incl. floor T0; band = the leave-one-out error of the estimate's "
        f"op class on the public trn2 calibration set ({classes}), widened outside the validated domain; "
        "limit = §5 physical lower bound (no T0); ref = CS149 reference latency measured on trn2."
    )
    if warnings:
        out.append(
            "Warnings (outside the validated domain; estimates above the best public measurement of their op class):"
        )
        out.extend(warnings)
    # seed lessons
    lines = []
    for r in rows:
        c = r.case
        if "conv_fusion" in c.lesson and c.key in ("conv224_fp16_p2", "conv224_fp32_p2", "conv224_fp16_p1"):
            f = c.lesson["conv_fusion"]
            est_txt = ""
            if r.status == "ok":
                est_txt = (
                    f"; fused {r.est.latency_us:,.0f} us vs unfused >= "
                    f"{r.est.latency_us + f['extra_time_lower_bound_us']:,.0f} us "
                    "(estimate + analytical extra passes)"
                )
                est_txt += f"; fused kernel's modelled HBM traffic {r.est.hbm_bytes / 1e6:.1f} MB"
            lines.append(
                f"  {c.label}: HBM fused {f['fused_hbm_bytes'] / 1e6:.1f} MB vs conv->bias->pool "
                f"{f['unfused_hbm_bytes'] / 1e6:.1f} MB (analytical){est_txt}"
            )
        if "attention_naive" in c.lesson:
            a = c.lesson["attention_naive"]
            est_txt = ""
            if r.status == "ok":
                est_txt = (
                    f"; blocked kernel's modelled HBM traffic {r.est.hbm_bytes / 1e6:.1f} MB, "
                    f"peak SBUF {r.est.peak_sbuf_bytes_per_partition / 1024:.1f} KiB/partition"
                )
            lines.append(
                f"  {c.label}: HBM blocked {a['blocked_hbm_bytes'] / 1e6:.1f} MB vs naive SxS "
                f"{a['naive_hbm_bytes'] / 1e6:.1f} MB "
                f"(+{a['naive_extra_time_lower_bound_us']:.0f} us of DMA at least); on-chip per partition "
                f"blocked {a['blocked_sbuf_bytes_per_partition'] / 1024:.1f} KiB "
                f"vs naive {a['naive_sbuf_bytes_per_partition'] / 1024:.1f} KiB (analytical){est_txt}"
            )
    if lines:
        out.append("Seed lesson (fusion / blocking), analytical traffic next to the estimates:")
        out.extend(lines)
    return "\n".join(out)


def bench_records(rows: Iterable[BenchRow]) -> list:
    recs = []
    for r in rows:
        rec = {
            "key": r.case.key,
            "label": r.case.label,
            "status": r.status,
            "message": r.message,
            "goal": r.case.goal,
            "goal_met": r.goal_met,
            "limits": r.case.limits,
            "reference_us": r.case.reference_us,
            "lesson": r.case.lesson,
            "seconds": r.seconds,
        }
        if r.est is not None:
            rec["estimate"] = r.est.to_record()
        recs.append(rec)
    return recs
