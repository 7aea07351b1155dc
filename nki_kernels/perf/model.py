"""``estimate(kernel, *args, **kwargs)``: run a kernel on the interpreter, schedule its trace.

Every number here is an ESTIMATE of the cost model (trn2-hardware.md §4), not a hardware
measurement.  The calibration error on the public trn2 measurements is in
docs/cost-model.md and ``nki_kernels.perf.calibration``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from nki_kernels.sim import trace_kernel
from nki_kernels.sim.core.options import default_options
from nki_kernels.sim.nki07 import Kernel as Kernel07
from nki_kernels.sim.nki07 import trace as trace07

from . import accuracy, chrome_trace, report
from .compiler import psum_zero_folds, sbuf_spill, vectorisable_loops, vectorised
from .costs import matmul_dtype
from .hardware import HardwareSpec, get_hardware
from .labels import ESTIMATE_LABEL
from .schedule import (
    WANT_SERIALISED,
    ModelOptions,
    Schedule,
    Scheduler,
    TraceFacts,
    build_dependencies,
    no_gc,
    schedule,
)

if TYPE_CHECKING:
    from nki_kernels.sim.core.options import SimOptions
    from nki_kernels.sim.core.trace import Trace


@dataclass(frozen=True)
class Alternative:
    """The estimate under the other side of a compiler choice the public sources cannot decide
    (:func:`alternatives`); the band of the estimate covers it."""

    choice: str  # what the choice is about
    modelled: str  # what the estimate assumes
    other: str  # what this alternative assumes
    latency_us: float  # the estimate under ``other`` (floor included)


@dataclass
class Estimate:
    """Result of :func:`estimate`.  All times are estimates in microseconds."""

    kernel_name: str
    hardware: str
    mode: str
    latency_us: float  # floor T0 + makespan
    makespan_us: float
    floor_us: float
    flops: int  # useful FLOPs: matmul + elementwise (not transposes)
    matmul_flops: int
    transpose_flops: int
    mm_dtype: str  # operand dtype with the most matmul FLOPs ("" if none)
    peak_flops: float  # TensorE peak for mm_dtype (FLOP/s)
    mfu: float  # matmul_flops / (latency * peak)
    hbm_bytes: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    dma_count: int
    dma_bytes: int
    arithmetic_intensity: float  # flops / hbm_bytes
    engine_busy_us: dict  # engine -> busy us (DMA: time any transfer active)
    engine_util: dict  # engine -> busy / makespan
    instruction_count: dict
    critical_engine: str
    top_lines: list  # [(location, busy_us, count, engines)]
    uncosted_ops: dict
    throttled_us: float
    exposed_load_stationary_us: float
    window: int = 0  # list-scheduling window used (ModelOptions.window)
    domain: list = field(default_factory=list)  # why the kernel is outside the validated domain
    alternatives: list = field(default_factory=list)  # Alternative: undecidable compiler choices
    peak_sbuf_bytes_per_partition: int = 0
    peak_psum_bytes_per_partition: int = 0
    trace_seconds: float = 0.0
    schedule_seconds: float = 0.0
    n_events: int = 0
    steady: str = ""  # how the modelled schedule read the loop programs (Schedule.steady; perf/steady.py)
    label: str = ESTIMATE_LABEL
    trace: Trace | None = field(default=None, repr=False)
    schedule: Schedule | None = field(default=None, repr=False)
    hw: HardwareSpec | None = field(default=None, repr=False)

    # ---- uncertainty (nki_kernels.perf.accuracy: leave-one-out calibration error) --------
    @property
    def op_class(self) -> str:
        """ "dma-vector", "mixed" or "tensor" (accuracy.op_class): selects the band."""
        return accuracy.op_class(self)

    @property
    def typical_error(self) -> float:
        """Half-width of the band: the op class's leave-one-out error, widened outside the domain."""
        return accuracy.typical_error(self)

    @property
    def band_us(self) -> tuple:
        return accuracy.band_us(self)

    @property
    def band_text(self) -> str:
        """ "est. 820.0 us, typical error ±12 % (tensor class)" — use it wherever the latency is printed."""
        return accuracy.band_text(self)

    @property
    def warnings(self) -> list:
        """Outside-the-validated-domain warnings, then the sanity gate (MFU above the best public figure)."""
        return accuracy.warnings(self)

    # ---- outputs ------------------------------------------------------------------------
    def summary(self, top: int = 5) -> str:
        return report.summary_text(self, top=top)

    def to_record(self) -> dict:
        return report.json_record(self)

    def write_json(self, path: str) -> str:
        return report.write_json_record(self, path)

    def chrome_trace(self) -> dict:
        return chrome_trace.to_chrome_trace(self)

    def write_chrome_trace(self, path: str) -> str:
        return chrome_trace.write_chrome_trace(self, path)

    def __str__(self) -> str:
        return self.summary()


def _kernel_name(kernel) -> str:
    for obj in (
        kernel,
        getattr(kernel, "kernel", None),
        getattr(kernel, "func", None),
        getattr(kernel, "__wrapped__", None),
    ):
        name = getattr(obj, "__name__", None)
        if name:
            return name
    return type(kernel).__name__


def estimate_trace(
    trace: Trace,
    hw: HardwareSpec | str = "trn2",
    options: ModelOptions | None = None,
    *,
    kernel_name: str = "",
    keep: bool = True,
    deps: list | None = None,
    with_alternatives: bool = True,
) -> Estimate:
    """Schedule an existing :class:`nki_kernels.sim.trace.Trace` and summarise it.  With
    ``with_alternatives`` the undecidable compiler choices are scheduled both ways (:func:`alternatives`)."""
    with no_gc():
        return _estimate_trace(trace, hw, options, kernel_name, keep, deps, with_alternatives)


def _estimate_trace(
    trace: Trace,
    hw: HardwareSpec | str,
    options: ModelOptions | None,
    kernel_name: str,
    keep: bool,
    deps: list | None,
    with_alternatives: bool,
) -> Estimate:
    hw = get_hardware(hw)
    opts = options or ModelOptions()
    events = list(trace.events)
    t0 = time.perf_counter()
    # shared by the modelled schedule and its alternatives; with the loop programs the trace ran (perf/steady.py)
    facts = TraceFacts(events, getattr(trace, "loop_runs", ()))
    if with_alternatives and not opts.serialise and facts.get("vectorisable_loops", lambda: vectorisable_loops(events)):
        facts.memo[WANT_SERIALISED] = True  # alternatives() schedules it: one dependency pass builds both
    sched = schedule(
        events,
        hw,
        opts,
        alloc_origins=getattr(trace, "alloc_origins", None),
        deps=deps,
        alloc_names=getattr(trace, "alloc_names", None),
        peak_sbuf=int(getattr(trace, "peak_sbuf_bytes_per_partition", 0) or 0),
        placed=getattr(trace, "placed_allocs", frozenset()),
        facts=facts,
    )
    floor = hw.floor_us(opts.mode) if opts.include_floor else 0.0
    alts = alternatives(trace, hw, opts, sched, floor, facts) if with_alternatives else []
    sched_s = time.perf_counter() - t0
    makespan_us = sched.makespan_ns / 1e3
    latency = floor + makespan_us

    mm_flops_by_dt: dict = {}
    flops = mm_flops = tr_flops = 0
    hbm_r = hbm_w = dma_bytes = dma_count = 0
    counts: dict = {}
    by_line: dict = {}
    elided, engine_of, dma_of, s_end, s_start = sched.elided, sched.engine_of, sched.dma, sched.end, sched.start
    loc_of: dict = {}  # (file, line) -> "basename:line"
    for i, (ev, is_dma) in enumerate(zip(events, facts.is_dma, strict=True)):
        if i in elided:  # removed by the compiler (a repeated load / transpose)
            continue
        eng = engine_of[i]
        counts[eng] = counts.get(eng, 0) + 1
        if is_dma:
            dma_count += 1
            dma_bytes += int(ev.bytes or 0)
            d = dma_of[i]
            c = d.cost
            hbm_r += c.hbm_read
            hbm_w += c.hbm_write
            dur = d.data_end - d.data_start
        else:
            dur = s_end[i] - s_start[i]
            if ev.op == "nc_matmul":
                f = int(ev.flops or 0)
                mm_flops += f
                flops += f
                dt = matmul_dtype(ev)
                mm_flops_by_dt[dt] = mm_flops_by_dt.get(dt, 0) + f
            elif ev.op == "nc_transpose":
                tr_flops += int(ev.flops or 0)
            else:
                flops += int(ev.flops or 0)
        fl = (ev.file, ev.line)
        loc = loc_of.get(fl)
        if loc is None:
            loc = loc_of[fl] = f"{os.path.basename(ev.file) if ev.file else '?'}:{ev.line}"
        rec = by_line.get(loc)
        if rec is None:
            rec = by_line[loc] = [0.0, 0, set()]
        rec[0] += dur
        rec[1] += 1
        rec[2].add(eng)
    mm_dtype = max(mm_flops_by_dt, key=lambda k: mm_flops_by_dt[k]) if mm_flops_by_dt else ""
    domain = [
        f"affine_range loop at {site} runs {trips} iterations of tiny instructions ({per} per "
        "iteration, <= 64 elements per partition): the compiler may vectorise them into a few large "
        "ones (affine_range docstring); not modelled"
        for site, trips, per in facts.get("vectorisable_loops", lambda: vectorisable_loops(events))
    ]
    spill = sbuf_spill(getattr(trace, "peak_sbuf_bytes_per_partition", 0) or 0, hw)
    if spill:
        domain.append(spill)
    peak = hw.pe_peak_flops(mm_dtype or "bfloat16")
    mfu = mm_flops / (latency * 1e-6 * peak) if latency > 0 and mm_flops else 0.0
    hbm = hbm_r + hbm_w
    busy_us = {e: v / 1e3 for e, v in sched.busy_ns.items()}
    busy_us["DMA issue"] = sched.issue_busy_ns / 1e3
    util = {e: (v / makespan_us if makespan_us > 0 else 0.0) for e, v in busy_us.items()}
    critical = max(busy_us, key=lambda k: busy_us[k]) if busy_us else ""
    top = sorted(((loc, v[0] / 1e3, v[1], "/".join(sorted(v[2]))) for loc, v in by_line.items()), key=lambda r: -r[1])
    return Estimate(
        kernel_name=kernel_name or getattr(trace, "kernel_name", "") or "kernel",
        hardware=hw.name,
        mode=opts.mode,
        latency_us=latency,
        makespan_us=makespan_us,
        floor_us=floor,
        flops=flops,
        matmul_flops=mm_flops,
        transpose_flops=tr_flops,
        mm_dtype=mm_dtype,
        peak_flops=peak,
        mfu=mfu,
        hbm_bytes=hbm,
        hbm_read_bytes=hbm_r,
        hbm_write_bytes=hbm_w,
        dma_count=dma_count,
        dma_bytes=dma_bytes,
        arithmetic_intensity=(flops / hbm if hbm else float("inf") if flops else 0.0),
        engine_busy_us=busy_us,
        engine_util=util,
        instruction_count=counts,
        critical_engine=critical,
        top_lines=top,
        uncosted_ops=dict(sched.uncosted_ops),
        throttled_us=sched.throttled_ns / 1e3,
        exposed_load_stationary_us=sched.exposed_ls_ns / 1e3,
        peak_sbuf_bytes_per_partition=getattr(trace, "peak_sbuf_bytes_per_partition", 0),
        peak_psum_bytes_per_partition=getattr(trace, "peak_psum_bytes_per_partition", 0),
        schedule_seconds=sched_s,
        steady=sched.steady,
        n_events=len(events),
        window=opts.window,
        domain=domain,
        alternatives=alts,
        trace=trace if keep else None,
        schedule=sched if keep else None,
        hw=hw,
    )


def alternatives(
    trace: Trace,
    hw: HardwareSpec,
    opts: ModelOptions,
    base: Schedule,
    floor_us: float,
    facts: TraceFacts | None = None,
) -> list:
    """The estimate under the other side of each compiler choice that the documentation and the public
    profiles cannot decide, for the choices this kernel actually meets (an :class:`Alternative` each;
    the band covers them, ``accuracy.band_us``):

    * copy placement -- copies and multiply/add-by-scalar ops without ``engine=`` balanced over
      VectorE/ScalarE (modelled: the public attention profile splits its evictions 14/10) or all left
      on the engine the trace records (VectorE for most ``nl.*`` ops);
    * PSUM fills -- ``nl.zeros(..., buffer=nl.psum)`` before an accumulation folded into the first
      matmul (modelled: the documented overwrite flag, the §3.1c conv) or executed on VectorE;
    * loops of tiny instructions -- run as traced and pipelined (modelled), merged across iterations by
      the compiler (compiler.vectorised: the fast side), or not pipelined at all (one physical copy
      per tile, strict program order: the slow side; the trn1 CS149 ladder ran 5x slower than the
      pipelined estimate)."""
    if facts is None or len(facts.events) != len(trace.events):
        facts = TraceFacts(list(trace.events), getattr(trace, "loop_runs", ()))
    events = facts.events
    origins = getattr(trace, "alloc_origins", None)
    names = getattr(trace, "alloc_names", None)
    peak = int(getattr(trace, "peak_sbuf_bytes_per_partition", 0) or 0)
    placed: frozenset | set = getattr(trace, "placed_allocs", frozenset())

    def run(o: ModelOptions, deps: list | None = None, extra_elided: dict | None = None, ev: Any = None) -> float:
        """The estimate under ``o`` (its makespan alone: Scheduler.makespan_ns); ``deps`` / ``ev``: given, else
        built."""
        evs = events if ev is None else ev
        f = facts if ev is None else facts.scaled(ev)
        if deps is None:
            deps = build_dependencies(events, o, origins, names, hw, peak, placed, facts)
        return floor_us + Scheduler(evs, hw, o, deps, extra_elided, f).makespan_ns() / 1e3

    out = []
    if opts.place_engines and any(
        e != r for e, r, d in zip(base.engine_of, facts.engine, facts.is_dma, strict=True) if not d
    ):
        out.append(
            Alternative(
                "copy placement",
                "copies / scalar ops without engine= balanced over VectorE and ScalarE",
                "all on the engine the trace records",
                run(replace(opts, place_engines=False), base.deps),
            )
        )
    if opts.fold_psum_zeros and facts.get("psum_folds", lambda: psum_zero_folds(events)):
        out.append(
            Alternative(
                "PSUM fills",
                "nl.zeros PSUM fills folded into the first matmul",
                "fills executed on VectorE",
                run(replace(opts, fold_psum_zeros=False)),
            )
        )
    if facts.get("vectorisable_loops", lambda: vectorisable_loops(events)):
        ev2, deps2, eli = vectorised(
            events, base.deps, facts.get("vectorisable_loops", lambda: vectorisable_loops(events))
        )
        out.append(
            Alternative(
                "loops of tiny instructions",
                "run as traced, pipelined",
                "merged across iterations by the compiler",
                run(opts, deps2, eli, ev2),
            )
        )
        out.append(
            Alternative(
                "loops of tiny instructions",
                "run as traced, pipelined",
                "not pipelined (one copy of each tile, program order)",
                run(replace(opts, serialise=True)),
            )
        )
    return out


def trace_of(
    kernel: Any, *args: Any, numerics: bool = True, sim_options: SimOptions | None = None, **kwargs: Any
) -> tuple[Any, Trace]:
    """Run ``kernel`` on the interpreter and return ``(outputs, trace)``."""
    opts = sim_options
    if opts is None:
        opts = default_options()
    if not getattr(opts, "trace", True):
        opts = opts.replace(trace=True)
    if not numerics:
        opts = opts.replace(trace_only=True)
    if _is_nki07(kernel):  # an NKI 0.7 kernel: the interpreter's 0.7 front end, same trace format
        return trace07(kernel, *args, options=opts, **kwargs)
    return trace_kernel(kernel, *args, options=opts, **kwargs)


def build_options(kernel: Any) -> dict:
    """The ModelOptions fields that follow from how a kernel is built: its front end (NKI 0.1
    ``neuronxcc.nki`` or 0.7 ``import nki``) and whether the compiler's middle end runs
    (``@nki.compiler.skip_middle_end_transformations`` turns it off)."""
    inner = getattr(kernel, "kernel", None)
    skip = bool(getattr(kernel, "skip_middle_end", False) or getattr(inner, "skip_middle_end", False))
    return {"frontend": "nki07" if _is_nki07(kernel) else "nki01", "middle_end": not skip}


def _is_nki07(kernel) -> bool:
    """An interpreter NKI 0.7 kernel (``nki.jit`` of ``nki_kernels.sim.nki07``) or a 0.7 host
    entry wrapping one (``kernels/_nki07.HostEntry``, ``nki_api == "0.7"``)."""
    if getattr(kernel, "nki_api", None) == "0.7":
        return True
    return isinstance(kernel, Kernel07)


def estimate(
    kernel: Any,
    *args: Any,
    hw: HardwareSpec | str = "trn2",
    mode: str = "benchmark",
    numerics: bool = True,
    options: ModelOptions | None = None,
    sim_options: SimOptions | None = None,
    **kwargs: Any,
) -> Estimate:
    """Estimate the trn2 latency of an NKI 0.1 kernel (ours or a user's) with the cost model.

    ``kernel`` is anything ``simulate_kernel`` accepts (``@nki.jit`` function, ``k[grid]``,
    a kernel written against ``neuronxcc.nki`` while the alias is installed).  Positional
    and keyword arguments go to the kernel.  ``numerics=False`` asks the interpreter to skip
    the NumPy math (trace only: outputs meaningless, much faster on big shapes).
    ``mode`` = "benchmark" (nki.benchmark latency) or "profile" (neuron-profile total_time).

    Returns an :class:`Estimate`; every figure in it is an estimate of the model.
    """
    opts = options or ModelOptions(mode=mode, **build_options(kernel))
    t0 = time.perf_counter()
    _, trace = trace_of(kernel, *args, numerics=numerics, sim_options=sim_options, **kwargs)
    trace_s = time.perf_counter() - t0
    est = estimate_trace(trace, hw=hw, options=opts, kernel_name=_kernel_name(kernel))
    est.trace_seconds = trace_s
    return est
