"""Physical limits (trn2-hardware.md §5): lower bounds with perfect overlap and no floor T0,
and the analytical "seed lesson" comparisons (fused vs unfused conv; blocked vs naive attention).

These are arithmetic on the hardware description, not estimates of a kernel.
"""

from __future__ import annotations

from .hardware import HardwareSpec, get_hardware

ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3": 1, "float8_e5m2": 1}


def _bounds(flops, hbm_bytes, dtype, hw, extra: dict | None = None) -> dict:
    hw = get_hardware(hw)
    compute = flops / hw.pe_peak_flops(dtype) * 1e6
    d = {
        "flops": flops,
        "min_hbm_bytes": hbm_bytes,
        "compute_us": compute,
        "hbm_us_dma_cap": hbm_bytes / (hw.v("dma_bw_gbps") * 1e9) * 1e6,
        "hbm_us_hbm": hbm_bytes / (hw.v("hbm_bw_gbps") * 1e9) * 1e6,
    }
    if extra:
        d.update(extra)
    d["limit_us"] = max(v for k, v in d.items() if k.endswith("_us"))
    d["bound_by"] = max((k for k in d if k.endswith("_us") and k != "limit_us"), key=lambda k: d[k])
    return d


def conv_limits(
    B: int, C: int, C_out: int, H: int, W: int, K: int, pool: int, dtype: str, hw: HardwareSpec | str = "trn2"
) -> dict:
    Ho, Wo = H - K + 1, W - K + 1
    it = ITEMSIZE[dtype]
    flops = 2 * B * C_out * C * K * K * Ho * Wo
    out = B * C_out * (Ho // pool) * (Wo // pool) * it
    hbm = B * C * H * W * it + C_out * C * K * K * it + C_out * it + out
    return _bounds(flops, hbm, dtype, hw)


def matmul_limits(M: int, K: int, N: int, dtype: str, hw: HardwareSpec | str = "trn2") -> dict:
    it = ITEMSIZE[dtype]
    return _bounds(2 * M * K * N, (M * K + K * N + M * N) * it, dtype, hw)


def attention_limits(B: int, H: int, S: int, D: int, causal: bool, dtype: str, hw: HardwareSpec | str = "trn2") -> dict:
    hw = get_hardware(hw)
    frac = 0.5 if causal else 1.0
    flops = int(4 * B * H * S * S * D * frac)
    exp_us = B * H * S * S * frac / (hw.v("partitions") * hw.v("act_clock_ghz") * 1e9) * 1e6
    return _bounds(flops, 4 * B * H * S * D * ITEMSIZE[dtype], dtype, hw, {"scalar_exp_us": exp_us})


def conv_unfused_traffic(
    B: int, C: int, C_out: int, H: int, W: int, K: int, pool: int, dtype: str, hw: HardwareSpec | str = "trn2"
) -> dict:
    """HBM bytes of conv -> bias -> maxpool as three kernels vs the fused kernel (analytical).

    Unfused: the conv writes the full (B, C_out, Ho, Wo) map; the bias pass reads and writes it;
    the pool pass (pool > 1) reads it and writes the pooled map.  The extra time is at least
    the extra bytes at the DMA cap plus one kernel floor per extra launch."""
    hw = get_hardware(hw)
    it = ITEMSIZE[dtype]
    Ho, Wo = H - K + 1, W - K + 1
    full = B * C_out * Ho * Wo * it
    pooled = B * C_out * (Ho // pool) * (Wo // pool) * it
    inp = B * C * H * W * it + C_out * C * K * K * it + C_out * it
    fused = inp + pooled
    unfused = inp + full + 2 * full + ((full + pooled) if pool > 1 else 0)
    launches = 2 if pool > 1 else 1
    extra_bytes = unfused - fused
    extra_us = extra_bytes / (hw.v("dma_bw_gbps") * 1e9) * 1e6 + launches * hw.v("floor_benchmark_us")
    return {
        "fused_hbm_bytes": fused,
        "unfused_hbm_bytes": unfused,
        "extra_hbm_bytes": extra_bytes,
        "extra_kernel_launches": launches,
        "extra_time_lower_bound_us": extra_us,
    }


def attention_naive_traffic(
    B: int, H: int, S: int, D: int, causal: bool, dtype: str, hw: HardwareSpec | str = "trn2", block_k: int = 512
) -> dict:
    """Naive attention materialises S x S scores (fp32) and probabilities (dtype) in HBM.

    Returns HBM bytes and on-chip bytes per partition for the naive and blocked schemes
    (analytical): naive keeps a full score row (S fp32 values) per partition to take its
    softmax; blocked keeps one K block of scores (block_k fp32) plus running max/sum."""
    hw = get_hardware(hw)
    it = ITEMSIZE[dtype]
    qkvo = 4 * B * H * S * D * it
    ss = B * H * S * S
    naive = qkvo + ss * 4 * 2 + ss * it * 2  # write+read scores, write+read probabilities
    return {
        "blocked_hbm_bytes": qkvo,
        "naive_hbm_bytes": naive,
        "extra_hbm_bytes": naive - qkvo,
        "naive_sbuf_bytes_per_partition": S * 4 + S * it,
        "blocked_sbuf_bytes_per_partition": block_k * 4 + block_k * it + 2 * 4 + D * 4,
        "naive_extra_time_lower_bound_us": (naive - qkvo) / (hw.v("dma_bw_gbps") * 1e9) * 1e6,
    }
