"""Per-instruction cost table (trn2-hardware.md §4.2), keyed by ISA op name.

One function per op class.  Compute ops return engine cycles (converted to ns with the
engine clock by :func:`compute_cost_ns`); DMA ops return a :class:`DmaCost`.  Ops that are
not in the table are costed with the generic elementwise rule and counted in
``Estimate.uncosted_ops`` so the report can say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

from nki_kernels.sim.core.trace import Dma, Elementwise, Event, IsaOp, Matmul, Reduce, Transpose

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
    p = ev.payload
    if type(p) in (Elementwise, Transpose) and (p.psum_in or p.psum_out):
        return True
    regions = list(ev.reads or []) + list(ev.writes or [])
    return any(getattr(r, "buffer", "") == "psum" for r in regions)


def _strided(ev) -> bool:
    p = ev.payload
    return type(p) is Elementwise and p.strided


def _func(ev) -> str:
    p = ev.payload
    return p.func if type(p) in (Elementwise, Reduce) else ""


def _n(ev) -> int:
    return max(1, int(ev.free_elems or 1))


def _elementwise_rate(ev, hw: HardwareSpec, perf_mode_ok: bool, engine: str = "") -> float:
    """Elements per partition per cycle for DVE copy-like ops (§2 VectorE perf mode)."""
    strided = _strided(ev)
    if (engine or ev.engine) == "DVE" and perf_mode_ok and _all_two_byte(ev):
        if strided or _psum_side(ev):
            return hw.v("dve_perf_mode_half")
        return hw.v("dve_perf_mode_fast")
    return 1.0 / hw.v("strided_factor") if strided else 1.0


def _min_ii(hw, cycles):
    return max(hw.v("min_ii_cycles"), cycles)


# ---- compute op classes (cycles) ------------------------------------------------------


def cost_copy_like(ev: Event, hw: HardwareSpec, engine: str = "") -> float:
    """tensor_scalar, tensor_copy, activation, memset: max(64, N/s) (§4.2)."""
    n: float = _n(ev)
    if ev.op == "memset" and _all_two_byte(ev):
        n = n / 2
    return _min_ii(hw, n / _elementwise_rate(ev, hw, perf_mode_ok=True, engine=engine))


def cost_tensor_tensor(ev: Event, hw: HardwareSpec) -> float:
    """max(64, cpe*N); half when one operand is in PSUM or all-bf16 SBUF add/mul/sub (§4.2)."""
    n = _n(ev)
    cpe = hw.v("tt_cycles_per_elem")
    func = _func(ev)
    fast = _psum_side(ev) or (_all_two_byte(ev) and not _strided(ev) and any(k in func for k in ("add", "mul", "sub")))
    cyc = cpe * n / (2.0 if fast else 1.0)
    if _strided(ev) and not fast:
        cyc *= hw.v("strided_factor")
    return _min_ii(hw, cyc)


def cost_reduce(ev: Event, hw: HardwareSpec) -> float:
    n = _n(ev)
    func = _func(ev)
    cyc = n * hw.v("reduce_cycles_per_elem")
    if _all_two_byte(ev) and ("add" in func or "max" in func):
        cyc /= 2
    return _min_ii(hw, cyc)


def cost_act_reduce(ev: Event, hw: HardwareSpec) -> float:
    return _min_ii(hw, _n(ev)) + hw.v("act_reduce_extra_cycles")


def _per_elem(key):
    def f(ev, hw):
        return _min_ii(hw, hw.v(key) * _n(ev))

    f.__doc__ = f"max(64, {key} * N)"
    return f


def cost_pool_index(ev: Event, hw: HardwareSpec) -> float:
    """iota / affine_select: 150 + N (§4.2)."""
    return hw.v("pool_start_cycles") + _n(ev)


def cost_vector_transpose(ev: Event, hw: HardwareSpec) -> float:
    return _min_ii(hw, _n(ev))


def cost_nc_transpose(ev: Event, hw: HardwareSpec) -> float:
    p = ev.payload
    if (type(p) is Transpose and not p.on_tensor_engine) or ev.engine != "PE":
        return cost_vector_transpose(ev, hw)
    parts = max(1, int(ev.partitions or 1))
    cyc = max(parts, min(hw.v("pe_min_cycles"), _n(ev)))
    if any(str(d) == "float32" for d in ev.in_dtypes):
        cyc *= hw.v("pe_transpose_fp32_factor")
    return cyc


def matmul_dtype(ev: Event) -> str:
    dts = [str(d) for d in ev.in_dtypes if d]
    if any(d == "float32" for d in dts):
        return "float32"
    if dts and all(d.startswith("float8") for d in dts):
        return "float8"
    return dts[0] if dts else "bfloat16"


def cost_matmul(ev: Event, hw: HardwareSpec) -> float:
    """max(64, N_moving) cycles per MM; FP32 x4; FP8 double_row same cycles for K=256 (§4.2)."""
    p = ev.payload
    n = int(p.N if type(p) is Matmul else ev.free_elems or 1)
    cyc = max(hw.v("pe_min_cycles"), n)
    dt = matmul_dtype(ev)
    if dt == "float32":
        cyc *= hw.v("pe_fp32_factor")
    # FP8 double_row: same cycles with K=256 per instruction (the flops double, not the time)
    return cyc


def load_stationary_cycles(ev: Event, hw: HardwareSpec) -> float:
    p = ev.payload
    mm = int(p.M if type(p) is Matmul else 128)
    cyc = mm / hw.v("pe_ls_divisor")
    if matmul_dtype(ev) == "float32":
        cyc *= hw.v("pe_fp32_factor")
    return cyc


def cost_topk(ev: Event, hw: HardwareSpec) -> float:
    """nisa.topk: 4*n + K GpSIMD cycles (the NKI 0.6 docstring), n the snake elements (the event's elements per
    partition), K the results per partition."""
    p = ev.payload
    n = int(p.elems if type(p) is Reduce else ev.free_elems or 1)
    k = 1
    for d in ev.out_shape[1:]:
        k *= int(d)
    return hw.v("topk_cycles_per_elem") * n + k


def cost_generic(ev: Event, hw: HardwareSpec) -> float:
    return _min_ii(hw, _n(ev))


# Instructions costed by the generic elementwise rule (cost_generic: max(64, N) cycles, N the elements per
# partition) for want of a public cycle figure; the estimate counts them in ``uncosted_ops`` and the report says
# so.  Each is a decision, not an omission: simulator_tests/test_perf_costs_cover_ops.py fails for an instruction
# the interpreter records (sim/core/trace.py IsaOp) that is in neither table.
GENERIC_COST: dict[str, str] = {
    IsaOp.DROPOUT: "VectorE elementwise with a random mask: no public cycle figure",
    IsaOp.MAX8: "VectorE top-8 per partition: no public cycle figure",
    IsaOp.NC_FIND_INDEX8: "VectorE index search: no public cycle figure",
    IsaOp.NC_MATCH_REPLACE8: "VectorE match and replace: no public cycle figure",
    IsaOp.NC_STREAM_SHUFFLE: "VectorE partition shuffle: no public cycle figure",
    IsaOp.SELECT_REDUCE: "VectorE select with a reduction: no public cycle figure",
    IsaOp.TENSOR_COPY_PREDICATED: "VectorE predicated copy: no public cycle figure",
    IsaOp.TENSOR_SCALAR_CUMULATIVE: "VectorE scan with a scalar: no public cycle figure",
    IsaOp.GATHER_FLATTENED: "GpSimd gather: no public cycle figure",
    IsaOp.LOCAL_GATHER: "GpSimd gather within partitions: no public cycle figure",
    IsaOp.RAND: "GpSimd random numbers: no public cycle figure",
    IsaOp.SEQUENCE_BOUNDS: "GpSimd segment bounds: no public cycle figure",
    IsaOp.TENSOR_PARTITION_REDUCE: "GpSimd reduction across partitions: no public cycle figure",
}

COMPUTE_COSTS: dict[str, Any] = {  # (keys: IsaOp members, which equal their str values)
    IsaOp.NC_MATMUL: cost_matmul,
    IsaOp.NC_TRANSPOSE: cost_nc_transpose,
    IsaOp.TENSOR_COPY: cost_copy_like,
    IsaOp.TENSOR_SCALAR: cost_copy_like,
    IsaOp.ACTIVATION: cost_copy_like,
    IsaOp.MEMSET: cost_copy_like,
    IsaOp.TENSOR_COPY_DYNAMIC: cost_copy_like,
    IsaOp.TENSOR_TENSOR: cost_tensor_tensor,
    IsaOp.TENSOR_REDUCE: cost_reduce,
    IsaOp.ACTIVATION_REDUCE: cost_act_reduce,
    IsaOp.TENSOR_SCALAR_REDUCE: cost_act_reduce,
    IsaOp.RECIPROCAL: _per_elem("reciprocal_cycles_per_elem"),
    IsaOp.BN_STATS: _per_elem("reduce_cycles_per_elem"),
    IsaOp.BN_AGGR: _per_elem("bn_aggr_cycles_per_elem"),
    IsaOp.TENSOR_TENSOR_SCAN: _per_elem("scan_cycles_per_elem"),
    IsaOp.SCALAR_TENSOR_TENSOR: _per_elem("stt_cycles_per_elem"),
    IsaOp.IOTA: cost_pool_index,
    IsaOp.AFFINE_SELECT: cost_pool_index,
    IsaOp.RANGE_SELECT: cost_pool_index,
    IsaOp.TOPK: cost_topk,
    IsaOp.TRANSPOSE: cost_vector_transpose,
}


def pe_instructions(ev: Event, hw: HardwareSpec) -> int:
    """TensorE hardware instructions behind one traced TensorE op: an fp32 matmul runs as two
    MATMUL instructions (``fp32_mode`` passes in the public trainium-kernel-fusion neuron-profile
    JSON: 2 per fp32 nc_matmul, 1 per fp32 transpose; the tutorial's 65,536 for 32,768)."""
    return 2 if ev.op == "nc_matmul" and matmul_dtype(ev) == "float32" else 1


def compute_cost_ns(ev: Event, hw: HardwareSpec, engine: str | None = None) -> tuple:
    """(duration ns, known_op) for a compute instruction on PE/ACT/DVE/POOL (``engine``: where the
    compiler placed it, default the recorded engine).  ScalarE/VectorE/GpSimd instructions pay
    ``engine_instr_overhead_cycles`` on top of their element rate; a ScalarE activation function
    (not a copy) ``act_func_extra_cycles`` more."""
    eng = str(engine or ev.engine)
    fn = COMPUTE_COSTS.get(ev.op)
    p = ev.payload
    if ev.op == "activation" and type(p) is Elementwise and p.reduce:
        fn = cost_act_reduce  # nisa.activation_reduce recorded as an activation with reduce
    known = fn is not None
    f = fn or cost_generic
    cyc = f(ev, hw, eng) if f is cost_copy_like else f(ev, hw)
    if eng == "POOL" and ev.op not in ("iota", "affine_select", "range_select"):
        cyc += hw.v("pool_start_cycles")
    if eng != "PE":
        cyc += hw.v("engine_instr_overhead_cycles")
        if eng == "ACT" and ev.op in ("activation", "activation_reduce"):
            cyc += hw.v("act_func_extra_cycles")
    clock = hw.v(_CLOCK.get(eng, "dve_clock_ghz"))
    return cyc / clock, known


# ---- DMA -------------------------------------------------------------------------------


@dataclass
class DmaCost:
    rings: int  # DMA engines used
    descriptors: int  # contiguous runs (HBM side x partition rows)
    desc_bytes: float  # bytes per descriptor
    ring_ns: float  # data-movement time on each ring used
    issue_ns: float  # DGE (or static trigger) time on the issuing queue
    hbm_read: int
    hbm_write: int


def dma_cost(ev: Event, hw: HardwareSpec, dma_mode: str) -> DmaCost:
    """Cost of one DMA; ``dma_mode`` "hwdge" (DGE queues generate descriptors, trn2 benchmark
    mode) or "static" (pre-computed descriptors: ``--disable-dge`` profile builds, trn1)."""
    m = cast(Dma, ev.payload)
    nbytes = max(0, int(ev.bytes or 0))
    p = max(1, int(ev.partitions or 1))
    src = m.src.value if m.src is not None else "const"
    dst = m.dst.value
    onchip = src in ("sbuf", "psum") or dst in ("sbuf", "psum")
    desc = max(1, int(m.descriptors or 1))
    if onchip:
        # every SBUF partition row is a separate run on the on-chip side
        desc = max(desc, p)
    desc_bytes = nbytes / desc if desc else 0.0
    rings = int(min(hw.v("dma_rings"), max(1, math.ceil(p / hw.v("dma_partitions_per_ring")))))
    per_ring_desc = math.ceil(desc / rings)
    bw = hw.v("dma_ring_bytes_per_ns")
    if ev.op == "dma_transpose":
        bw *= (
            hw.v("dma_transpose_eff_hbm")
            if (src in HBM_BUFFERS or dst in HBM_BUFFERS)
            else hw.v("dma_transpose_eff_sbuf")
        )
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
