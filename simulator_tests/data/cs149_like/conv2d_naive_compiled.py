"""A CS149 2025 part2 solution of the naive-but-compiled kind (trn2-hardware.md §3.1c): every loop a
sequential_range, one input-row SBUF buffer refilled by a DMA per (output row, C_out tile, C_in tile,
filter row), 3 accumulating matmuls per refill, built with skip_middle_end_transformations.  The kernel
is the cost model's calibration re-creation (nki_kernels/perf/calib_kernels_conv.py), written for this
project after the measured solution's described structure; that solution scored 60/60 on trn2
(824 us fp16, 3,832 us fp32)."""
from nki_kernels.perf.calib_kernels_conv import conv_rowwise as fused_conv2d_maxpool  # noqa: F401
