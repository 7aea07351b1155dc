"""Wall time of the CS149 conv2d correctness matrix under the NumPy interpreter.

    .venv/bin/python scripts/time_cs149.py            # the full matrix (7 cases)
    .venv/bin/python scripts/time_cs149.py --quick    # the small-image cases only
    .venv/bin/python scripts/time_cs149.py --check    # also compare with the float64 oracle (slow)

Prints, per case, the simulation wall time, the instruction counts by op and the peak SBUF
bytes per partition.  OpenBLAS is pinned to one thread (set before NumPy is imported):
the interpreter issues thousands of small 128x128x512 GEMMs, and on a busy 2-core machine
a second BLAS thread makes each one several times slower.  Override with
OPENBLAS_NUM_THREADS in the environment.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("NKI_BACKEND", "sim")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nki_kernels.kernels.conv2d import fused_conv2d_maxpool  # noqa: E402
from nki_kernels.oracles import conv2d_maxpool_ref  # noqa: E402
from nki_kernels.sim import trace_kernel  # noqa: E402

# The CS149 F25 correctness matrix (part2 test_harness): batch 4, 3x3 filters, fp32.
SMALL = [(4, ci, co, 32, 16, 1, False) for ci in (128, 256) for co in (128, 256)]
LARGE = [(4, 256, 256, 224, 224, 1, False), (4, 256, 256, 224, 224, 1, True), (4, 256, 256, 224, 224, 2, True)]


def run(case: tuple, check: bool, rng: np.random.Generator) -> float:
    B, ci, co, H, W, pool, with_bias = case
    X = rng.random((B, ci, H, W), dtype=np.float32)
    Wt = rng.random((co, ci, 3, 3), dtype=np.float32)
    bias = rng.random(co, dtype=np.float32) if with_bias else np.zeros(co, np.float32)
    t = time.perf_counter()
    out, trace = trace_kernel(fused_conv2d_maxpool, X, Wt, bias, pool_size=pool)
    dt = time.perf_counter() - t
    ops = Counter(e.op for e in trace.events)
    name = f"b{B}_ci{ci}_co{co}_h{H}w{W}_p{pool}_{'bias' if with_bias else 'nobias'}"
    line = (
        f"{name:38s} sim {dt:6.2f} s  instr {len(trace.events):6d}  "
        f"matmul {ops['nc_matmul']:6d}  dma {ops['dma_copy']:4d}  "
        f"peak SBUF {trace.peak_sbuf_bytes_per_partition} B/partition"
    )
    if check:
        ref = conv2d_maxpool_ref(X, Wt, bias, pool)
        err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
        line += f"  max rel err {err:.1e}"
    print(line, flush=True)
    return dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small-image cases only")
    ap.add_argument("--check", action="store_true", help="compare with the float64 oracle (not timed)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    cases = SMALL + ([] if args.quick else LARGE)
    total = sum(run(c, args.check, rng) for c in cases)
    print(
        f"total simulation wall time: {total:.2f} s for {len(cases)} cases "
        f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
