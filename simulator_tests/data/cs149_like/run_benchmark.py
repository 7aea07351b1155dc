"""A runner shaped like CS149 part1 `run_benchmark.py` (ours): baremetal check, then benchmark."""
import argparse

import neuronxcc.nki as nki
import numpy as np
from kernels import add_stream, transpose

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", choices=("stream", "transpose"), required=True)
    ap.add_argument("-n", type=int, required=True)
    a = ap.parse_args()
    if a.kernel == "transpose":
        kernel, args = transpose, [np.random.rand(a.n, a.n).astype(np.float32)]
        expected = args[0].T
    else:
        kernel = add_stream
        args = [np.random.rand(a.n).astype(np.float32), np.random.rand(a.n).astype(np.float32), 512]
        expected = args[0] + args[1]
    out = nki.baremetal(kernel)(*args)
    print(f"Correctness passed? {np.allclose(out, expected)}")
    assert np.allclose(out, expected)
    bench_func = nki.benchmark(kernel, warmup=1, iters=10)
    bench_func(*args)
    p99_us = bench_func.benchmark_result.nc_latency.get_latency_percentile(99)
    print(f"Execution Time: {p99_us} us")
