"""Per-instruction cost table (trn2-hardware.md §4.2), keyed by ISA op name.

One function per op class.  Compute ops return engine cycles (converted to ns with the
engine clock by :func:`compute_cost_ns`); DMA ops return a :class:`DmaCost`.  Ops that are
not in the table are costed with the generic elementwise rule and counted in
``Estimate.uncosted_ops`` so the report can say so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .hardware import HardwareSpec

TWO_BYTE_FLOATS = ("bfloat16", "float16")
HBM_BUFFERS = ("hbm", "shared_hbm", "private_hbm")
_CLOCK = {"PE": "pe_clock_ghz", "ACT": "act_clock_ghz", "DVE": "dve_clock_ghz", "POOL": "pool_clock_ghz"}


def _all_two_byte(ev) -> bool:
    if ev.out_dtype not in TWO_BYTE_FLOATS:
        return False
    for d in ev.in_dtypes:
        if d and d not in TWO_BYTE_FLOATS:
            return False
    return True


def _psum_side(ev) -> bool:
    m = ev.meta or {}
    if m.get("psum_in") or m.get("psum_out"):
        return True
    regions = list(ev.reads or []) + list(ev.writes or [])
    return any(getattr(r, "buffer", "") == "psum" for r in regions)


def _n(ev) -> int:
    return max(1, int(ev.free_elems or 1))


def _elementwise_rate(ev, hw: HardwareSpec, perf_mode_ok: bool) -> float:
    """Elements per partition per cycle for DVE copy-like ops (§2 VectorE perf mode)."""
    strided = bool((ev.meta or {}).get("strided"))
    if ev.engine == "DVE" and perf_mode_ok and _all_two_byte(ev):
        if strided or _psum_side(ev):
            return hw.v("dve_perf_mode_half")
        return hw.v("dve_perf_mode_fast")
    return 1.0 / hw.v("strided_factor") if strided else 1.0


def _min_ii(hw, cycles):
    return max(hw.v("min_ii_cycles"), cycles)


# ---- compute op classes (cycles) ------------------------------------------------------

def cost_copy_like(ev, hw):
    """tensor_scalar, tensor_copy, activation, memset: max(64, N/s) (§4.2)."""
    n = _n(ev)
    if ev.op == "memset" and _all_two_byte(ev):
        n = n / 2
    if (ev.meta or {}).get("dynamic"):
        return max(hw.v("dynamic_copy_cycles"), n)
    return _min_ii(hw, n / _elementwise_rate(ev, hw, perf_mode_ok=True))


def cost_tensor_tensor(ev, hw):
    """max(64, cpe*N); half when one operand is in PSUM or all-bf16 SBUF add/mul/sub (§4.2)."""
    n = _n(ev)
    cpe = hw.v("tt_cycles_per_elem")
    func = str((ev.meta or {}).get("func", ""))
    fast = _psum_side(ev) or (_all_two_byte(ev) and not (ev.meta or {}).get("strided")
                              and any(k in func for k in ("add", "mul", "sub")))
    cyc = cpe * n / (2.0 if fast else 1.0)
    if (ev.meta or {}).get("strided") and not fast:
        cyc *= hw.v("strided_factor")
    return _min_ii(hw, cyc)


def cost_reduce(ev, hw):
    n = _n(ev)
    func = str((ev.meta or {}).get("func", ""))
    cyc = n * hw.v("reduce_cycles_per_elem")
    if _all_two_byte(ev) and ("add" in func or "max" in func):
        cyc /= 2
    return _min_ii(hw, cyc)


def cost_act_reduce(ev, hw):
    return _min_ii(hw, _n(ev)) + hw.v("act_reduce_extra_cycles")


def _per_elem(key):
    def f(ev, hw):
        return _min_ii(hw, hw.v(key) * _n(ev))
    f.__doc__ = f"max(64, {key} * N)"
    return f


def cost_pool_index(ev, hw):
    """iota / affine_select: 150 + N (§4.2)."""
    return hw.v("pool_start_cycles") + _n(ev)


def cost_vector_transpose(ev, hw):
    return _min_ii(hw, _n(ev))


def cost_nc_transpose(ev, hw):
    if (ev.meta or {}).get("engine_kind") == "vector" or ev.engine != "PE":
        return cost_vector_transpose(ev, hw)
    p = max(1, int(ev.partitions or 1))
    cyc = max(p, min(hw.v("pe_min_cycles"), _n(ev)))
    if any(str(d) == "float32" for d in ev.in_dtypes):
        cyc *= hw.v("pe_transpose_fp32_factor")
    return cyc


def matmul_dtype(ev) -> str:
    dts = [str(d) for d in ev.in_dtypes if d]
    if any(d == "float32" for d in dts):
        return "float32"
    if dts and all(d.startswith("float8") for d in dts):
        return "float8"
    return dts[0] if dts else "bfloat16"


def cost_matmul(ev, hw):
    """max(64, N_moving) cycles per MM; FP32 x4; FP8 double_row same cycles for K=256 (§4.2)."""
    m = ev.meta or {}
    n = int(m.get("N", ev.free_elems or 1))
    cyc = max(hw.v("pe_min_cycles"), n)
    dt = matmul_dtype(ev)
    if dt == "float32":
        cyc *= hw.v("pe_fp32_factor")
    # FP8 double_row: same cycles with K=256 per instruction (the flops double, not the time)
    return cyc


def load_stationary_cycles(ev, hw) -> float:
    m = ev.meta or {}
    mm = int(m.get("M", 128))
    cyc = mm / hw.v("pe_ls_divisor")
    if matmul_dtype(ev) == "float32":
        cyc *= hw.v("pe_fp32_factor")
    return cyc


def cost_generic(ev, hw):
    return _min_ii(hw, _n(ev))


COMPUTE_COSTS = {
    "nc_matmul": cost_matmul,
    "nc_transpose": cost_nc_transpose,
    "tensor_copy": cost_copy_like,
    "tensor_scalar": cost_copy_like,
    "activation": cost_copy_like,
    "memset": cost_copy_like,
    "tensor_copy_dynamic": cost_copy_like,
    "tensor_tensor": cost_tensor_tensor,
    "tensor_reduce": cost_reduce,
    "activation_reduce": cost_act_reduce,
    "tensor_scalar_reduce": cost_act_reduce,
    "reciprocal": _per_elem("reciprocal_cycles_per_elem"),
    "bn_stats": _per_elem("reduce_cycles_per_elem"),
    "bn_aggr": _per_elem("bn_aggr_cycles_per_elem"),
    "tensor_tensor_scan": _per_elem("scan_cycles_per_elem"),
    "scalar_tensor_tensor": _per_elem("stt_cycles_per_elem"),
    "iota": cost_pool_index,
    "affine_select": cost_pool_index,
    "range_select": cost_pool_index,
    "transpose": cost_vector_transpose,
}


def compute_cost_ns(ev, hw: HardwareSpec) -> tuple:
    """(duration ns, known_op) for a compute instruction on PE/ACT/DVE/POOL."""
    fn = COMPUTE_COSTS.get(ev.op)
    if ev.op == "activation" and (ev.meta or {}).get("reduce"):
        fn = cost_act_reduce      # nisa.activation_reduce recorded as an activation with reduce
    known = fn is not None
    cyc = (fn or cost_generic)(ev, hw)
    if ev.engine == "POOL" and ev.op not in ("iota", "affine_select", "range_select"):
        cyc += hw.v("pool_start_cycles")
    clock = hw.v(_CLOCK.get(ev.engine, "dve_clock_ghz"))
    return cyc / clock, known


# ---- DMA -------------------------------------------------------------------------------

@dataclass
class DmaCost:
    rings: int            # DMA engines used
    descriptors: int      # contiguous runs (HBM side x partition rows)
    desc_bytes: float     # bytes per descriptor
    ring_ns: float        # data-movement time on each ring used
    issue_ns: float       # DGE (or static trigger) time on the issuing queue
    hbm_read: int
    hbm_write: int


def dma_cost(ev, hw: HardwareSpec, dma_mode: str) -> DmaCost:
    """Cost of one DMA; ``dma_mode`` "hwdge" (DGE queues generate descriptors, trn2 benchmark
    mode) or "static" (pre-computed descriptors: ``--disable-dge`` profile builds, trn1)."""
    m = ev.meta or {}
    nbytes = max(0, int(ev.bytes or 0))
    p = max(1, int(ev.partitions or 1))
    src, dst = str(m.get("src", "")), str(m.get("dst", ""))
    onchip = src in ("sbuf", "psum") or dst in ("sbuf", "psum")
    desc = max(1, int(m.get("descriptors") or 1))
    if onchip:
        # every SBUF partition row is a separate run on the on-chip side
        desc = max(desc, p)
    desc_bytes = nbytes / desc if desc else 0.0
    rings = int(min(hw.v("dma_rings"), max(1, math.ceil(p / hw.v("dma_partitions_per_ring")))))
    per_ring_desc = math.ceil(desc / rings)
    bw = hw.v("dma_ring_bytes_per_ns")
    if ev.op == "dma_transpose":
        bw *= hw.v("dma_transpose_eff_hbm") if (src in HBM_BUFFERS or dst in HBM_BUFFERS) \
            else hw.v("dma_transpose_eff_sbuf")
    # Each DMA engine it uses has a control path and a data path, pipelined across the DMAs
    # queued on the engine: control = a fixed per-transfer overhead (descriptor setup and
    # synchronisation, DB "Why large contiguous DMA payloads are required"; larger when a DGE
    # generates the descriptors at run time) + dma_desc_ns per descriptor; data = its bytes at
    # 23 B/ns.  Small transfers are control-bound ("the engines spend more time on overhead
    # than on data movement", DB), >= 4 KiB per partition data-bound (DB: "sustain its peak").
    fixed = hw.v("dma_fixed_hwdge_ns" if dma_mode == "hwdge" else "dma_fixed_static_ns")
    control = fixed + per_ring_desc * hw.v("dma_desc_ns")
    data = per_ring_desc * desc_bytes / bw
    ring_ns = max(control, data)
    issue = hw.v("dge_issue_ns") if dma_mode == "hwdge" else hw.v("static_issue_ns")
    rd = nbytes if src in HBM_BUFFERS else 0
    wr = nbytes if dst in HBM_BUFFERS else 0
    return DmaCost(rings, desc, desc_bytes, ring_ns, issue, rd, wr)
