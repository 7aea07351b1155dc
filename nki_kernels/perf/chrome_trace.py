"""Chrome trace-event JSON of an estimated timeline (opens in ui.perfetto.dev / chrome://tracing).

One process ("NeuronCore-v3 cost-model ESTIMATE"), one track (thread) per engine and per DMA
queue: "Kernel floor", "TensorE (PE)", "VectorE (DVE)", "ScalarE (ACT)", "GpSimdE (POOL)",
"DMA issue (HW-DGE queue k | static trigger)", "DMA queue 0..15".  Every slice is a complete event (``ph: "X"``) named
by the op, with the kernel source line, NKI API, shapes, bytes and FLOPs in ``args``.
Timestamps are microseconds from the start of the kernel (the floor T0 is drawn first).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from . import accuracy
from .labels import ENGINE_NAMES

if TYPE_CHECKING:
    from .model import Estimate

PID = 1
_TRACK_ORDER = ["floor", "PE", "DVE", "ACT", "POOL", "issue"]


def _track_name(key: str, mode: str) -> str:
    if key == "floor":
        return "Kernel floor T0 (launch + I/O, estimate)"
    if key.startswith("issue"):
        return (
            f"DMA issue (HW-DGE queue {key[5:]})" if mode == "benchmark" and key[5:] else "DMA issue (static trigger)"
        )
    if key.startswith("q"):
        return f"DMA queue {key[1:]}"
    return f"{ENGINE_NAMES.get(key, key)} ({key})"


def _hwdge(est) -> bool:
    return est.mode == "benchmark" and est.hw is not None and est.hw.v("dge_queues") >= 1


def to_chrome_trace(est: Estimate) -> dict:
    if est.trace is None or est.schedule is None:
        raise ValueError("this Estimate was made with keep=False; re-run estimate_trace(..., keep=True)")
    sched = est.schedule
    events = est.trace.events
    off = est.floor_us
    tids: dict = {}

    def tid(key):
        if key not in tids:
            tids[key] = len(tids) + 1
        return tids[key]

    for k in _TRACK_ORDER:
        if k == "floor" and off <= 0:
            continue
        if k in ("PE", "DVE", "ACT", "POOL") and not any(e.engine == k for e in events):
            continue
        if k == "issue":
            for q in sorted({d.dge for d in sched.dma.values()}):
                tid(f"issue{q}" if _hwdge(est) else "issue")
            continue
        tid(k)
    out = []
    if off > 0:
        out.append(
            {
                "name": "kernel floor T0",
                "cat": "floor",
                "ph": "X",
                "pid": PID,
                "tid": tid("floor"),
                "ts": 0.0,
                "dur": off,
                "args": {"estimate": True, "what": "launch + I/O + semaphores (fitted constant)"},
            }
        )
    elided = getattr(sched, "elided", {}) or {}
    for i, ev in enumerate(events):
        if i in elided:  # hoisted loop-invariant repeat: no work, no slice
            continue
        loc = f"{os.path.basename(ev.file) if ev.file else '?'}:{ev.line}"
        args = {
            "line": loc,
            "file": ev.file,
            "api": ev.api,
            "seq": ev.seq,
            "partitions": ev.partitions,
            "free_elems": ev.free_elems,
            "in_shapes": [list(s) for s in ev.in_shapes],
            "out_shape": list(ev.out_shape),
            "dtypes": list(ev.in_dtypes) + [ev.out_dtype],
            "bytes": ev.bytes,
            "flops": ev.flops,
        }
        if ev.program_id:
            args["program_id"] = list(ev.program_id)
        name = f"{ev.op} {loc}"
        if ev.engine == "DMA":
            d = sched.dma[i]
            args.update(
                {
                    "queue": d.queue,
                    "dma_engines": d.cost.rings,
                    "descriptors": d.cost.descriptors,
                    "bytes_per_descriptor": round(d.cost.desc_bytes, 1),
                    "issue_us": [off + d.issue_start / 1e3, off + d.issue_end / 1e3],
                    "data_us": [off + d.data_start / 1e3, off + d.data_end / 1e3],
                    "src": ev.payload.src.value if ev.payload.src is not None else "const",
                    "dst": ev.payload.dst.value,
                }
            )
            out.append(
                {
                    "name": name,
                    "cat": "DMA",
                    "ph": "X",
                    "pid": PID,
                    "tid": tid(f"q{d.queue}"),
                    "ts": off + d.issue_start / 1e3,
                    "dur": (d.data_end - d.issue_start) / 1e3,
                    "args": args,
                }
            )
            out.append(
                {
                    "name": f"issue {ev.op} {loc}",
                    "cat": "DMA issue",
                    "ph": "X",
                    "pid": PID,
                    "tid": tid(f"issue{d.dge}" if _hwdge(est) else "issue"),
                    "ts": off + d.issue_start / 1e3,
                    "dur": (d.issue_end - d.issue_start) / 1e3,
                    "args": {"line": loc, "seq": ev.seq},
                }
            )
        else:
            eng = sched.engine_of[i]  # where the compiler placed it (compiler.place_engines)
            out.append(
                {
                    "name": name,
                    "cat": eng,
                    "ph": "X",
                    "pid": PID,
                    "tid": tid(eng),
                    "ts": off + sched.start[i] / 1e3,
                    "dur": (sched.end[i] - sched.start[i]) / 1e3,
                    "args": args,
                }
            )
    meta = [
        {
            "name": "process_name",
            "ph": "M",
            "pid": PID,
            "tid": 0,
            "args": {
                "name": f"{est.hardware} NeuronCore cost-model ESTIMATE: {est.kernel_name} ({accuracy.band_text(est)})"
            },
        }
    ]
    for key, t in tids.items():
        meta.append(
            {"name": "thread_name", "ph": "M", "pid": PID, "tid": t, "args": {"name": _track_name(key, est.mode)}}
        )
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": t, "args": {"sort_index": t}})
    return {
        "traceEvents": meta + out,
        "displayTimeUnit": "ns",
        "otherData": {
            "estimate": True,
            "note": "ESTIMATE from the nki-kernels cost model, not a hardware profile",
            "kernel": est.kernel_name,
            "hardware": est.hardware,
            "mode": est.mode,
            "latency_us": est.latency_us,
            "floor_us": est.floor_us,
            **accuracy.record(est),
        },
    }


def write_chrome_trace(est: Estimate, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(to_chrome_trace(est), f)
    return path
