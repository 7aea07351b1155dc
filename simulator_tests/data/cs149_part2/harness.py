"""A CS149-shaped part2 harness (our own, small shapes; copied as test_harness.py) for the end-to-end test of
`nki-kernels run test_harness.py --simulate --test_maxpool`.

It mirrors what the official CS149 starters' harnesses (2024 asst4-trainium, 2025
asst4-trainium2) do: import `neuronxcc.nki`, call `logging.disable(logging.OFF)`, wrap the
student's `conv2d.fused_conv2d_maxpool` with `nki.simulate_kernel` under `--simulate`, run the
correctness cases against a reference, then time the kernel with `nki.benchmark`.
"""
import argparse
import logging

import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl  # noqa: F401  (the starters import it here too)
from neuronxcc.nki import baremetal, benchmark  # noqa: F401

from conv2d import fused_conv2d_maxpool as conv2d
from conv2d_reference import conv2d_maxpool_numpy

logging.disable(logging.OFF)


def check(kernel, use_larger_images, use_bias, use_maxpool):
    pool = 2 if use_maxpool else 1
    dims = (12, 10) if use_larger_images else (7, 6)
    for c_in in (128, 256):
        for c_out in (128,):
            X = np.random.rand(2, c_in, *dims).astype(np.float32)
            W = np.random.rand(c_out, c_in, 3, 3).astype(np.float32)
            bias = np.random.rand(c_out).astype(np.float32) if use_bias else np.zeros(c_out, np.float32)
            out = kernel(X, W, bias, pool_size=pool)
            if not np.allclose(out, conv2d_maxpool_numpy(X, W, bias, pool_size=pool)):
                print(f"Output mismatch for {c_in=}, {c_out=}, {dims=}, {use_bias=}, {use_maxpool=}")
                return False
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--test_maxpool", action="store_true")
    parser.add_argument("--simulate", action="store_true")
    args = parser.parse_args()
    np.random.seed(42)
    if args.simulate:
        kernel = lambda *a, **k: nki.simulate_kernel(conv2d, *a, **k)  # noqa: E731
    else:
        kernel = baremetal(conv2d)
    cases = [(False, False, False), (True, False, False), (True, True, False)]
    if args.test_maxpool:
        cases.append((True, True, True))
    passed = 0
    for larger, bias, pool in cases:
        print(f"Running correctness test larger={larger} bias={bias} maxpool={pool}...", end=" ", flush=True)
        ok = check(kernel, larger, bias, pool)
        passed += ok
        print("Passed" if ok else "Failed")
    if passed < len(cases):
        print("Correctness failed, skipping performance tests.")
        raise SystemExit(0)
    print(f"Correctness: {passed}/{len(cases)} passed")
    bench = nki.benchmark(warmup=5, iters=20)(conv2d)
    X = np.random.rand(1, 128, 12, 10).astype(np.float32)
    bench(X, np.random.rand(128, 128, 3, 3).astype(np.float32), np.random.rand(128).astype(np.float32))
    print("p99:", bench.benchmark_result.nc_latency.get_latency_percentile(99))
