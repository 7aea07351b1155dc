"""Text summary (neuron-profile field names where they exist) and JSON records.

Field names follow ``neuron-profile view --output-format summary-text`` (seen in the public
CZ profile of the 1024x1024 transpose): total_time and *_active_time in seconds,
*_active_time_percent as fractions, dma_transfer_count, dma_transfer_total_bytes,
dma_transfer_average_bytes, hbm_read_bytes, hbm_write_bytes, hardware_flops, model_flops,
transpose_flops, mfu_estimated_percent, mm_arithmetic_intensity, matmul_instruction_count,
*_instruction_count, throttle_active_nc0_time_ns.  Fields with no neuron-profile twin are
prefixed ``est_``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from typing import TYPE_CHECKING

from . import accuracy
from .labels import ENGINE_NAMES, ESTIMATE_LABEL

if TYPE_CHECKING:
    from .model import Estimate

_ACTIVE = {"PE": "tensor_engine", "ACT": "scalar_engine", "DVE": "vector_engine", "POOL": "gpsimd_engine", "DMA": "dma"}
BANNER = (
    "ESTIMATE from the nki-kernels cost model (no Trainium was used; the typical error of each estimate "
    "is its op class's leave-one-out calibration error, see docs/cost-model.md)"
)


def profile_fields(est: Estimate) -> dict:
    """neuron-profile-like summary fields (seconds / fractions as neuron-profile prints them)."""
    total_s = est.latency_us * 1e-6
    out: dict = {"total_time": total_s, "total_active_time": est.makespan_us * 1e-6}
    for e, name in _ACTIVE.items():
        busy = est.engine_busy_us.get(e, 0.0) * 1e-6
        out[f"{name}_active_time"] = busy
        out[f"{name}_active_time_percent"] = busy / total_s if total_s else 0.0
    out.update(
        {
            "dma_transfer_count": est.dma_count,
            "dma_transfer_total_bytes": est.dma_bytes,
            "dma_transfer_average_bytes": (est.dma_bytes / est.dma_count) if est.dma_count else 0,
            "hbm_read_bytes": est.hbm_read_bytes,
            "hbm_write_bytes": est.hbm_write_bytes,
            "hardware_flops": est.matmul_flops + est.transpose_flops,
            "model_flops": est.matmul_flops,
            "transpose_flops": est.transpose_flops,
            "mfu_estimated_percent": est.mfu,
            "mm_arithmetic_intensity": (est.matmul_flops / est.hbm_bytes) if est.hbm_bytes else 0.0,
            "matmul_instruction_count": sum(
                1 for ev in (est.trace.events if est.trace else []) if ev.op == "nc_matmul"
            ),
            "tensor_engine_instruction_count": est.instruction_count.get("PE", 0),
            "scalar_engine_instruction_count": est.instruction_count.get("ACT", 0),
            "vector_engine_instruction_count": est.instruction_count.get("DVE", 0),
            "gpsimd_engine_instruction_count": est.instruction_count.get("POOL", 0),
            "throttle_active_nc0_time_ns": est.throttled_us * 1e3,
            "est_floor_time": est.floor_us * 1e-6,
            "est_dma_issue_time": est.engine_busy_us.get("DMA issue", 0.0) * 1e-6,
            "est_flops": est.flops,
            "est_arithmetic_intensity": est.arithmetic_intensity,
            "est_critical_engine": est.critical_engine,
            "est_exposed_load_stationary_time": est.exposed_load_stationary_us * 1e-6,
            "est_typical_error": accuracy.typical_error(est),
            "est_op_class": accuracy.op_class(est),
        }
    )
    return out


def summary_text(est: Estimate, top: int = 5) -> str:
    lines = [
        BANNER,
        f"kernel {est.kernel_name}  hardware {est.hardware}  mode {est.mode}  ({est.n_events} instructions)",
    ]
    lo, hi = accuracy.band_us(est)
    lines.append(
        f"  estimated latency      {est.latency_us:12.2f} us  ({ESTIMATE_LABEL}; {accuracy.band_text(est)}: "
        f"{lo:,.1f}..{hi:,.1f} us; floor T0 {est.floor_us:.1f} us + makespan {est.makespan_us:.2f} us)"
    )
    for w in accuracy.warnings(est):
        lines.append(f"  {w}")
    if est.matmul_flops:
        lines.append(
            f"  estimated MFU          {100 * est.mfu:12.1f} %   (vs {est.mm_dtype} TensorE peak "
            f"{est.peak_flops / 1e12:.2f} TFLOP/s)"
        )
    lines.append(
        f"  FLOPs                  {est.flops:12.4g}      (matmul {est.matmul_flops:.4g}, "
        f"transpose {est.transpose_flops:.4g} not counted)"
    )
    lines.append(
        f"  HBM bytes              {est.hbm_bytes:12.4g}      (read {est.hbm_read_bytes:.4g}, "
        f"write {est.hbm_write_bytes:.4g}); arithmetic intensity "
        f"{est.arithmetic_intensity:.3g} FLOP/B"
    )
    lines.append(f"  DMAs                   {est.dma_count:12d}      ({est.dma_bytes:.4g} bytes)")
    lines.append(f"  critical engine        {est.critical_engine:>12s}")
    lines.append("  engine busy (estimate):")
    for e in ("PE", "ACT", "DVE", "POOL", "DMA", "DMA issue"):
        if e in est.engine_busy_us:
            lines.append(
                f"    {ENGINE_NAMES.get(e, e):10s} {e:9s} {est.engine_busy_us[e]:10.2f} us  "
                f"{100 * est.engine_util.get(e, 0.0):5.1f} % of makespan"
            )
    if est.top_lines:
        lines.append("  top kernel lines by busy time (estimate):")
        for loc, us, cnt, engs in est.top_lines[:top]:
            lines.append(f"    {loc:40s} {us:10.2f} us  {cnt:7d} instr  {engs}")
    sched = est.schedule
    if sched is not None and (sched.reordered or sched.elided):
        lines.append(
            f"  scheduling (estimate)   {sched.reordered} instructions started ahead of program order "
            f"(window {getattr(est, 'window', '?')}); {len(sched.elided)} instructions removed by the compiler "
            "(repeated loop-invariant transposes and loads, PSUM fills folded into the first matmul)"
        )
    if est.uncosted_ops:
        lines.append(
            "  ops without a cost rule (costed as generic elementwise): "
            + ", ".join(f"{k} x{v}" for k, v in sorted(est.uncosted_ops.items()))
        )
    lines.append("  neuron-profile-style fields (estimate):")
    for k, v in profile_fields(est).items():
        lines.append(f"    {k:42s} {v}")
    return "\n".join(lines)


def _git_rev() -> str:
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except Exception:
        return ""


def json_record(est: Estimate, extra: dict | None = None) -> dict:
    """A self-describing record for tracking estimates over time."""
    rec = {
        "schema": "nki-kernels/perf-estimate/1",
        "label": ESTIMATE_LABEL,
        "note": BANNER,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_rev": _git_rev(),
        "python": platform.python_version(),
        "kernel": est.kernel_name,
        "hardware": est.hardware,
        "mode": est.mode,
        "latency_us": est.latency_us,
        "accuracy": accuracy.record(est),
        "makespan_us": est.makespan_us,
        "floor_us": est.floor_us,
        "mfu": est.mfu,
        "mm_dtype": est.mm_dtype,
        "flops": est.flops,
        "matmul_flops": est.matmul_flops,
        "hbm_bytes": est.hbm_bytes,
        "dma_count": est.dma_count,
        "dma_bytes": est.dma_bytes,
        "arithmetic_intensity": est.arithmetic_intensity if est.hbm_bytes else None,
        "engine_busy_us": est.engine_busy_us,
        "critical_engine": est.critical_engine,
        "top_lines": [list(t) for t in est.top_lines[:10]],
        "profile_fields": profile_fields(est),
    }
    if extra:
        rec.update(extra)
    return rec


def write_json_record(est: Estimate, path: str, extra: dict | None = None) -> str:
    """Append-friendly: writes one JSON object (pretty) to ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(json_record(est, extra), f, indent=1, default=str)
    return path
