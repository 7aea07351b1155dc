"""Hardware descriptions for the cost model, held as data.

Each constant is a :class:`Const` with its value, unit, tag and source:

* ``D`` documented (AWS docs or ISA docstrings), ``M`` measured on hardware by someone else,
  ``E`` our estimate or derivation, ``F`` fitted by ``nki_kernels.perf.calibration`` on the
  public trn2 measurements, within ``range`` (the documented or estimated bounds).
* ``source`` uses the source keys of ``/work/shared/trn2-hardware.md`` (A1, A2, ISA, DB, DO,
  PX, CZ, XG, AK, ...) and the section of that file the number comes from.

A :class:`HardwareSpec` is a name plus a dict of constants.  ``TRN2`` is NeuronCore-v3;
``TRN1`` (NeuronCore-v2) is the same table with overrides, which shows that a second
description needs no code changes.  Users can load their own with
:func:`load_hardware` from a JSON file of the same shape (``{"name": ..., "base": "trn2",
"constants": {"pe_clock_ghz": {"value": 2.8, "tag": "D", "source": "..."}}}``).

Every time the model prints is an ESTIMATE, not a hardware measurement.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field, replace
from functools import cached_property

TAGS = {"D": "documented", "M": "measured (public)", "E": "estimated", "F": "fitted"}


@dataclass(frozen=True)
class Const:
    value: float
    unit: str
    tag: str  # D | M | E | F
    source: str
    range: tuple | None = None  # allowed tuning range (lo, hi), if the constant may be fitted
    note: str = ""
    prior: float | None = None  # value before fitting (tag F only)

    def __post_init__(self) -> None:
        if self.tag not in TAGS:
            raise ValueError(f"Const tag must be one of {sorted(TAGS)}, got {self.tag!r}")
        if self.range is not None:
            lo, hi = self.range
            if not (lo <= self.value <= hi):
                raise ValueError(f"Const value {self.value} outside its range {self.range}")


def _c(value, unit, tag, source, range=None, note="", prior=None):
    return Const(float(value), unit, tag, source, tuple(range) if range else None, note, prior)


# ---------------------------------------------------------------------------------------
# NeuronCore-v3 (Trainium2), one physical core.  Sections refer to trn2-hardware.md.
# ---------------------------------------------------------------------------------------
_TRN2 = {
    # clocks (§1.2)
    "pe_clock_ghz": _c(2.4, "GHz", "D", "A2 §1.2 TensorE clock"),
    "dve_clock_ghz": _c(0.96, "GHz", "D", "A2 §1.2 VectorE clock"),
    "act_clock_ghz": _c(1.2, "GHz", "D", "A2 §1.2 ScalarE clock"),
    "pool_clock_ghz": _c(1.2, "GHz", "D", "A1/A2 §1.2 GpSimdE clock"),
    "profiler_clock_ghz": _c(1.2, "GHz", "M", "CZ neuroncore_cycle_count / total_time §1.2"),
    # TensorE (§1.2, §4.2)
    "pe_rows": _c(128, "PE", "D", "A2 §1.2 128x128 systolic array"),
    "pe_cols": _c(128, "PE", "D", "A2 §1.2 128x128 systolic array"),
    "pe_min_cycles": _c(64, "cycles", "D", "ISA §4.2 MM cost max(N, 64)"),
    "pe_fp32_factor": _c(4, "x", "D", "A2/ISA §1.2 FP32 matmul at 1/4 of BF16"),
    "pe_fp8_double_row_factor": _c(0.5, "x", "D", "A2 §1.2 FP8 double_row 2x BF16 rate"),
    "pe_ls_divisor": _c(4, "x", "E", "A1 §4.2 LoadStationary up to 4x faster than MM (we use 4)"),
    "pe_transpose_fp32_factor": _c(
        2,
        "x",
        "M",
        "A2 §4.2 FP32 transpose mode; M: trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): fp32 128x128 "
        "transposes issue every 109-110 ns unthrottled = 2 x 128 cycles at 2.4 GHz",
    ),
    "pe_result_latency_cycles": _c(64, "cycles", "D", "A1/PG §1.4 MM_INIT_LATENCY (v2 figure)"),
    "pe_instr_overhead_cycles": _c(
        6,
        "cycles",
        "M",
        "trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): back-to-back MATMUL instructions issue every 516-518 cycles for 512 bf16 "
        "columns and 262-269 for 128 fp32-pass columns (+4..13); AWS kernel-optimization "
        "tutorial v3/v5: 28.16 ms TensorE active for 65,536 fp32 MATMULs of 1024 cycles "
        "(+7 per instruction).  Charged per hardware instruction (costs.pe_instructions)",
    ),
    "pe_throttle_window_ns": _c(
        3413,
        "ns",
        "M",
        "trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): the 'ham' utilisation-limit records change only on a 3413 ns grid (4096 "
        "cycles of the 1.2 GHz profiler clock); PX: '~3 us' window",
    ),
    "pe_throttle_util": _c(
        0.45,
        "fraction",
        "M",
        "PX: limit re-engages below 50 % utilisation over a ~3 us window; M: trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): windows with "
        "TensorE busy 0.39-0.43 of the time were followed by a 50 % limit, 0.46-0.47 were not",
    ),
    "pe_throttle_speed": _c(
        0.5,
        "fraction",
        "D",
        "PX: a burst starts at ~50% of maximum utilisation; M: trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports) 'ham' k=4/n=8 records and "
        "matmul issue intervals doubled inside them; CZ avg_util_limit 0.5",
    ),
    # VectorE / ScalarE / GpSimdE (§1.4, §2, §4.2)
    "min_ii_cycles": _c(64, "cycles", "D", "ISA/A1 §1.4 MIN_II"),
    "dep_bubble_cycles": _c(100, "cycles", "D", "A1 §1.4 static overhead of dependent back-to-back instrs"),
    "engine_instr_overhead_cycles": _c(
        60,
        "cycles",
        "M",
        "trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): back-to-back independent VectorE/ScalarE instructions of N=128/512 "
        "elements issue every N+59..60 cycles (COPY, TENSOR_REDUCE, CAST); §6.11 "
        "'~60-cycle access bubble' (A1/PG, v2)",
    ),
    "act_func_extra_cycles": _c(
        150,
        "cycles",
        "M",
        "trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): ScalarE ACTIVATE (exp with a bias vector) of 512 fp32 elements issues every "
        "~600 ns = N+208 cycles at 1.2 GHz, against N+60 for a ScalarE COPY",
    ),
    "dve_perf_mode_fast": _c(4, "x", "D", "A2 §2 VectorE perf mode 4x (bf16/fp16, SBUF->SBUF, unit stride)"),
    "dve_perf_mode_half": _c(2, "x", "D", "A2 §2 VectorE perf mode 2x (strided or one side PSUM; tensor_tensor bf16)"),
    "tt_cycles_per_elem": _c(
        1.75,
        "cycles/elem",
        "M",
        "CZ/RC #5/#6 VectorE active 3.65-3.8 us for 3 (6) fp32 tensor_tensor of 128x2000 (1000) "
        "at 0.96 GHz = 1.75-1.82 cycles/elem (ISA docstring says 2N, §4.3 step 2)",
    ),
    "strided_factor": _c(2, "x", "D", "A1 §2 inner-most stride >16 B halves engine access"),
    "reduce_cycles_per_elem": _c(1, "cycles/elem", "D", "ISA §4.2 tensor_reduce N"),
    "act_reduce_extra_cycles": _c(64, "cycles", "D", "ISA §4.2 activation_reduce +64"),
    "reciprocal_cycles_per_elem": _c(8, "cycles/elem", "D", "ISA §4.2 reciprocal 8N"),
    "bn_aggr_cycles_per_elem": _c(13 / 3, "cycles/elem", "D", "ISA §4.2 bn_aggr 13N/3"),
    "scan_cycles_per_elem": _c(2, "cycles/elem", "D", "ISA §4.2 tensor_tensor_scan 2N"),
    "stt_cycles_per_elem": _c(2, "cycles/elem", "D", "ISA §4.2 scalar_tensor_tensor 2N"),
    "pool_start_cycles": _c(150, "cycles", "D", "ISA §1.4 GpSimd instruction start ~150 cycles"),
    "topk_cycles_per_elem": _c(
        4, "cycles/elem", "D", "aws-neuron-sdk 81ce03ae nki.isa.topk docstring: 4*n + K GpSIMD cycles per partition"
    ),
    "dynamic_copy_cycles": _c(600, "cycles", "D", "ISA §1.4 dynamic-offset tensor_copy MIN_II"),
    "sem_ns": _c(75, "ns", "E", "§4.2 semaphore hop 50-100 ns", range=(50, 100)),
    # DMA (§1.3, §1.4, §2, §4.2)
    "dma_rings": _c(16, "engines", "D", "A2/DO §1.1 16 DMA engines per NC"),
    "dma_partitions_per_ring": _c(8, "partitions", "D", "§2 DMA engines take 8 partitions each"),
    "dma_ring_bytes_per_ns": _c(23, "B/ns", "D", "DB/DO §1.3 23 B/ns per engine; M: DO 32 KiB in 1,416 ns"),
    "dma_desc_ns": _c(
        15, "ns", "E", "§4.2 c_d 5-25 ns per descriptor on a DMA engine's control path (pipelined with data)"
    ),
    "dma_max_inflight": _c(
        16, "DMAs", "E", "DO §1.1: 16 queues per engine -> 16 concurrent NC-wide DMAs (our reading)"
    ),
    "dma_latency_ns": _c(
        1300,
        "ns",
        "F",
        "§4.2 L issue-to-data + completion semaphore; fitted to every "
        "DMA-carrying point (trainium-kernel-fusion profile: first packet ~1.2 us after its DGE instruction)",
        range=(500, 1300),
        prior=900,
        note="range: DO serial floor ~0.85 us (E) .. DB semaphore-to-start 1.3 us (D)",
    ),
    "dge_queues": _c(
        3,
        "queues",
        "M",
        "A2 §DGE / DG: two hardware DGE instances per NeuronCore-v3 (SyncE, ScalarE "
        "sequencers) + software DGE on GpSimd; M: trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): NKI 0.1 kernels issue DMAs from all three",
    ),
    "dge_queues_serial": _c(
        1,
        "queues",
        "M",
        "queues of the builds that issue one DMA after the other: NKI 0.7 (AWS kernel-optimization tutorial "
        "81ce03ae v2-dma.png: 'Hardware Dynamic Dma Packet Count 0', every DMA software-DGE, GpSimd busy throughout "
        "v2-full.png; 39.89 ms for 66,560 DMAs = 599 ns per DMA on one queue) and, in a "
        "skip_middle_end_transformations build, DMAs in affine_range loops (XG's CS149 ladder: 486 / 613 / 587 ns "
        "per DMA, #1-#3; ModelOptions.skip_issue)",
    ),
    "dge_exec_ns": _c(600, "ns", "D", "DG / A2: each hardware-DGE DMA instruction takes about 600 ns to execute"),
    "dge_issue_ns": _c(
        550,
        "ns",
        "M",
        "occupancy of a DGE queue per DMA. DG: ~600 ns per hardware-DGE DMA instruction; "
        "M: trainium-kernel-fusion d709ddf neuron-profile JSON (profiling/artifacts/*/json_reports): DMA_DIRECT2D instructions on the Sync/Scalar queues take 517-605 ns, software-DGE "
        "ones on GpSimd follow each other every ~580 ns; the tutorial's v2 599 ns per DMA",
    ),
    "dma_fixed_hwdge_ns": _c(
        0,
        "ns",
        "M",
        "DB: every DMA transfer incurs descriptor setup, synchronisation and semaphore-to-start overhead on the "
        "DMA engines it uses; here only the part that occupies an engine beyond dma_desc_ns per descriptor (the "
        "rest is dma_latency_ns).  M: the trainium-kernel-fusion d709ddf neuron-profile JSON shows 4 KiB packets "
        "back to back at ~24 B/ns with ~0-15 ns between them, and the bf16 2048x4096x4096 GEMM p50 allows ~0 ns "
        "above its 1 KiB rows' data time; the §3.1c conv (2,664 row DMAs of 128 x 448 B in 824 us) allows at most "
        "~100 ns per DMA and engine.  No longer fitted (the previous fit put it at 200 ns, which the conv rules out)",
    ),
    "dma_fixed_static_ns": _c(
        0,
        "ns",
        "E",
        "as dma_fixed_hwdge_ns for pre-computed (static) descriptors (--disable-dge, trn1): "
        "nothing to generate at run time, so only dma_desc_ns per descriptor remains (our reading of "
        "DG 'none'); only #8 is sensitive to it, so it is not fitted",
    ),
    "static_issue_ns": _c(50, "ns", "M", "CZ sync_engine_active_time / sync_engine_instruction_count = 5.8 us / 117"),
    "dma_transpose_eff_hbm": _c(0.9, "fraction", "D", "A2 §2 DMA transpose HBM->SBUF <=90%"),
    "dma_transpose_eff_sbuf": _c(0.5, "fraction", "D", "A2 §2 DMA transpose SBUF->SBUF <=50%"),
    "dma_bw_gbps": _c(368, "GB/s", "D", "DB/DO §1.3 16 x 23 B/ns (practical DMA cap per NC)"),
    "hbm_bw_gbps": _c(716, "GB/s", "M", "CZ §1.3 profiler MBU denominator per NC"),
    # kernel floor (§1.4, §4.2): launch + I/O + semaphores, per measurement mode
    "floor_benchmark_us": _c(
        12.0,
        "us",
        "F",
        "§1.4 AK/XG trivial kernels 12.6-15.3 us; fitted to every benchmark-mode point "
        "(trainium-kernel-fusion profile preamble ~13 us before the first instruction, LNC=2)",
        range=(10, 15.3),
        prior=13.0,
    ),
    "floor_profile_us": _c(
        15.1,
        "us",
        "F",
        "CZ #8 total_time - total_active_time = 13.2 us; fitted to #5, #6, #8",
        range=(10, 16),
        prior=13.2,
    ),
    # memories (§1.3)
    "sbuf_bytes_per_partition": _c(229376, "B", "D", "A2 §1.3 224 KiB per partition (28 MiB)"),
    "sbuf_usable_bytes_per_partition": _c(212984, "B", "D", "KLR tile_size.total_available_sbuf_size"),
    "multibuffer_budget_bytes": _c(
        65536,
        "B/partition",
        "E",
        "SBUF per partition the allocator spends on the physical copies of one tile written in a loop "
        "(compiler.Allocation, any loop kind and build): depth = budget / tile bytes, at least 2, at most "
        "multibuffer_max_depth, bounded by the SBUF the kernel leaves free",
    ),
    "multibuffer_max_depth": _c(
        8,
        "copies",
        "E",
        "deepest rotation the allocator gives one tile (compiler.Allocation); trainium-kernel-fusion GEMM bf16 "
        "2048x4096x4096 (DMA-bound at ~23 B/ns per engine, 1.74 us per load in flight) needs >= 6; the §3.1c conv "
        "(one row DMA per 3 matmuls, ~2.2 us from a slot freeing to its refill landing) needs >= 8",
    ),
    "load_reuse_budget_bytes": _c(
        196608,
        "B/partition",
        "E",
        "reuse distance up to which a repeated nl.load is served from SBUF (compiler."
        "redundant_loads): the 24 MiB the allocator treats as SBUF (AK) / 128. Bound by "
        "trainium-kernel-fusion GEMM p50s: 132 KiB/partition reused (bf16 1024x2048x4096 at "
        "76 % MFU), 260 KiB not (2048x4096x4096 DMA-bound)",
    ),
    "psum_bytes_per_partition": _c(16384, "B", "D", "A1/A2 §1.3 8 banks x 2 KiB"),
    "psum_banks": _c(8, "banks", "D", "A1/A2 §1.3"),
    "partitions": _c(128, "partitions", "D", "A2 §1.3"),
}


@dataclass(frozen=True)
class HardwareSpec:
    """A named set of constants; read a value with ``spec.v("pe_clock_ghz")`` or ``spec["..."]``."""

    name: str
    description: str
    constants: dict = field(default_factory=dict)

    def __getitem__(self, key: str) -> Const:
        try:
            return self.constants[key]
        except KeyError:
            raise KeyError(
                f"hardware {self.name!r} has no constant {key!r}; known: {', '.join(sorted(self.constants))}"
            ) from None

    def v(self, key: str) -> float:
        try:
            return self._values[key]
        except KeyError:
            return self[key].value

    @cached_property
    def _values(self) -> dict:
        return {k: c.value for k, c in self.constants.items()}

    def with_values(self, **values: float) -> HardwareSpec:
        """Copy with some values replaced (used by the fitter); ranges are enforced."""
        consts = dict(self.constants)
        for k, val in values.items():
            consts[k] = replace(self[k], value=float(val))
        return replace(self, constants=consts)

    # derived figures ------------------------------------------------------------------
    def pe_peak_flops(self, dtype: str = "bfloat16") -> float:
        """TensorE peak FLOP/s for an operand dtype (2 * rows * cols * clock / factor)."""
        base = 2 * self.v("pe_rows") * self.v("pe_cols") * self.v("pe_clock_ghz") * 1e9
        d = (dtype or "bfloat16").lower()
        if d in ("float32", "fp32"):
            return base / self.v("pe_fp32_factor")
        if d.startswith("float8") or d.startswith("fp8"):
            return base / self.v("pe_fp8_double_row_factor")
        return base

    def ridge_flop_per_byte(self, dtype: str = "bfloat16", bw: str = "hbm") -> float:
        gbps = self.v("hbm_bw_gbps" if bw == "hbm" else "dma_bw_gbps")
        return self.pe_peak_flops(dtype) / (gbps * 1e9)

    def floor_us(self, mode: str) -> float:
        return self.v("floor_profile_us" if mode == "profile" else "floor_benchmark_us")

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "constants": {
                k: {
                    "value": c.value,
                    "unit": c.unit,
                    "tag": c.tag,
                    "source": c.source,
                    "range": list(c.range) if c.range else None,
                    "note": c.note,
                    "prior": c.prior,
                }
                for k, c in sorted(self.constants.items())
            },
        }


TRN2 = HardwareSpec("trn2", "Trainium2 NeuronCore-v3 (one physical core)", dict(_TRN2))


# NeuronCore-v2 (Trainium1): overrides only.  For cross-checks against §3.2; the DMA issue
# and floor constants are carried over from trn2 (E) because no trn1 calibration was fitted.
_TRN1_OVERRIDES = {
    "pe_clock_ghz": {"value": 2.8, "tag": "D", "source": "A1 §1.2 NC-v2 TensorE clock"},
    "dve_clock_ghz": {"value": 1.12, "tag": "D", "source": "A1 §1.2 NC-v2 VectorE clock"},
    "act_clock_ghz": {"value": 1.4, "tag": "D", "source": "A1 §1.2 NC-v2 ScalarE clock"},
    "pool_clock_ghz": {"value": 1.4, "tag": "D", "source": "A1 §1.2 NC-v2 GpSimdE clock"},
    "dve_perf_mode_fast": {"value": 1, "tag": "D", "source": "A2 §2 perf mode is new in v3"},
    "dve_perf_mode_half": {"value": 1, "tag": "D", "source": "A2 §2 perf mode is new in v3"},
    "pe_transpose_fp32_factor": {"value": 1, "tag": "E", "source": "A2 transpose mode is v3-only"},
    "dma_ring_bytes_per_ns": {"value": 17, "tag": "D", "source": "§4.3 trn1 17 B/ns (DO table)"},
    "dge_queues": {
        "value": 0,
        "tag": "D",
        "source": "A2 §DGE: hardware DGE is new in NeuronCore-v3; v2 DMAs use pre-computed (static) descriptors",
    },
    "dma_bw_gbps": {"value": 272, "tag": "E", "source": "16 x 17 B/ns"},
    "hbm_bw_gbps": {
        "value": 410,
        "tag": "E",
        "source": "trn1 chip 820 GB/s / 2 NCs (not in trn2-hardware.md; estimate)",
    },
    "sbuf_bytes_per_partition": {"value": 196608, "tag": "D", "source": "A2 §1.3 v2 192 KiB per partition"},
    "sbuf_usable_bytes_per_partition": {"value": 180224, "tag": "D", "source": "KLR trn1 total_available_sbuf_size"},
}


# What a JSON hardware description may hold (``nki-kernels profile --hw FILE``).  Every value is
# checked before the model sees it: a clock of 0 divided by zero, a negative one printed a negative
# MFU, 1e-300 or a non-integer queue count hung or crashed the scheduler (measured on matmul 256^3).
_DESCRIPTION_KEYS = ("name", "description", "base", "constants")
_CONSTANT_KEYS = ("value", "unit", "tag", "source", "range", "note", "prior")
# Units of counts (engines, queues, partitions, ...): whole numbers.
_COUNT_UNITS = {"PE", "engines", "partitions", "DMAs", "queues", "banks", "copies"}
# How far a value may be from trn2's: beyond 1000x either way it is a typo or a unit mistake
# (GHz given in MHz), not a NeuronCore; the model's loops and divisions assume physical values.
PLAUSIBLE_FACTOR = 1000.0


def _check_value(key: str, value: object, unit: str) -> float:
    """A constant's value from JSON, or ValueError naming the constant and what is allowed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"constant {key!r}: value must be a number, got {value!r}")
    v = float(value)
    ref = _TRN2[key].value
    trn1 = float(_TRN1_OVERRIDES.get(key, {}).get("value", ref))  # type: ignore[arg-type]
    zero_ok = ref == 0 or trn1 == 0  # dge_queues (trn1: static DMA), dma_fixed_static_ns
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"constant {key!r}: value must be finite, got {value!r}")
    if v < 0 or (v == 0 and not zero_ok):
        raise ValueError(f"constant {key!r}: value must be {'>= 0' if zero_ok else '> 0'} ({unit}), got {value!r}")
    if unit in _COUNT_UNITS and v != int(v):
        raise ValueError(f"constant {key!r}: a count ({unit}) must be a whole number, got {value!r}")
    if unit == "fraction" and v > 1:
        raise ValueError(f"constant {key!r}: a fraction must be in (0, 1], got {value!r}")
    top = max(ref, trn1, 1.0) * PLAUSIBLE_FACTOR
    low = min(x for x in (ref, trn1) if x > 0) / PLAUSIBLE_FACTOR if ref > 0 or trn1 > 0 else 0.0
    if v > top or (v < low and not (v == 0 and zero_ok)):
        raise ValueError(
            f"constant {key!r}: {value!r} {unit} is more than {PLAUSIBLE_FACTOR:,.0f}x away from trn2's "
            f"{ref:g} (allowed {low:g}..{top:g}); check the unit"
        )
    return v


def _check_description(d: object) -> dict:
    """The shape of a JSON hardware description; ValueError (one line) saying what is wrong."""
    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object with name, base and constants, got {type(d).__name__}")
    unknown = [k for k in d if k not in _DESCRIPTION_KEYS]
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(_DESCRIPTION_KEYS)}")
    base = d.get("base")
    if base is not None and (not isinstance(base, str) or base.lower() not in _REGISTRY):
        raise ValueError(f'"base" must be one of {", ".join(sorted(_REGISTRY))}, got {base!r}')
    consts = d.get("constants", {})
    if not isinstance(consts, dict):
        raise ValueError(f'"constants" must be an object of name: value, got {type(consts).__name__}')
    if not base and not consts:
        raise ValueError('an empty description; give "base": "trn2" (or "trn1") and the constants that differ')
    for k, spec in consts.items():
        if k not in _TRN2:
            close = difflib.get_close_matches(k, list(_TRN2), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"unknown constant {k!r}; {hint}known: the {len(_TRN2)} names of nki-kernels profile's trn2 "
                "description (nki_kernels/perf/hardware.py)"
            )
        if isinstance(spec, dict):
            extra = [x for x in spec if x not in _CONSTANT_KEYS]
            if extra:
                raise ValueError(f"constant {k!r}: unknown field(s) {', '.join(map(repr, extra))}")
            if "value" not in spec:
                raise ValueError(f'constant {k!r}: no "value"')
    return d


def spec_from_dict(d: dict, base: HardwareSpec | None = None) -> HardwareSpec:
    """Build a spec from JSON-like data: ``{"name", "description", "base", "constants"}``.

    Constants not given are taken from ``base`` (by name: "trn2"/"trn1"), so a description
    of another core only lists what differs.  Every value is checked (:func:`_check_value`):
    finite, positive (>= 0 where trn2 or trn1 has 0), whole for counts, at most 1 for fractions and
    within 1000x of trn2's value; anything else is a ValueError naming the constant."""
    _check_description(d)
    if base is None and d.get("base"):
        base = get_hardware(d["base"])
    consts = dict(base.constants) if base is not None else {}
    for k, spec in d.get("constants", {}).items():
        if not isinstance(spec, dict):
            spec = {"value": spec}
        old = consts.get(k)
        unit = spec.get("unit", old.unit if old else _TRN2[k].unit)
        try:
            consts[k] = _c(
                _check_value(k, spec["value"], unit),
                unit,
                spec.get("tag", "E"),
                spec.get("source", "user-provided"),
                spec.get("range"),
                spec.get("note", ""),
                spec.get("prior"),
            )
        except (TypeError, ValueError) as exc:
            text = str(exc)
            raise ValueError(text if text.startswith("constant ") else f"constant {k!r}: {text}") from None
    missing = sorted(set(_TRN2) - set(consts))
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ValueError(
            f'hardware description {d.get("name")!r} lacks constants: {shown} (give "base": "trn2" to inherit them)'
        )
    return HardwareSpec(str(d.get("name", "custom")), str(d.get("description", "")), consts)


TRN1 = spec_from_dict(
    {
        "name": "trn1",
        "description": "Trainium1 NeuronCore-v2 (cross-check only; DMA/floor constants carried from trn2)",
        "constants": _TRN1_OVERRIDES,
    },
    base=TRN2,
)

_REGISTRY = {"trn2": TRN2, "trn1": TRN1}


def get_hardware(name_or_path: HardwareSpec | str = "trn2") -> HardwareSpec:
    """ "trn2" | "trn1" | a HardwareSpec | a path to a JSON description."""
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    key = str(name_or_path).lower()
    if key in _REGISTRY:
        return _REGISTRY[key]
    if os.path.exists(name_or_path):
        with open(name_or_path) as f:
            return spec_from_dict(json.load(f))
    raise ValueError(f"unknown hardware {name_or_path!r}: use one of {sorted(_REGISTRY)} or a JSON file path")


load_hardware = get_hardware
