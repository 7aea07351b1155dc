"""Kernel cases for the hardware path: the CS149 matrix and the extended shapes.

Standard library only at import time, so this file also runs as a script
(``python nki_kernels/hw/shapes.py --kernels conv2d --shapes quick``) to print the
plan that ``scripts/run_hw.sh`` executes, before anything is installed.

Shape sets (each includes the previous one):

- ``quick``: one or two small cases per kernel; seconds on a device.
- ``cs149``: adds the CS149 Assignment 4 conv2d matrix (stanford-cs149/asst4-trainium2
  ``part2/test_harness.py``): correctness at B=4 on 32x16 images with 128/256 channels and
  on 224x224 images with and without bias and 2x2 max-pool; performance at B=1, 256->256
  channels, FP32 and FP16, pool 1 and 2, on 224x224 (graded) and 32x16 (extra credit), with
  the harness's p99 thresholds.  Matmul and attention get one mid-size case each.
- ``full``: adds the extended shapes (other channel counts and kernel sizes, large
  matmuls, long-sequence and multi-head attention).

A case is checked for correctness (``correctness=True``), benchmarked and profiled
(``bench=True``), or both.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field

KERNELS = ("conv2d", "matmul", "attention")
SHAPE_SETS = ("quick", "cs149", "full")

# CS149 part2 harness: (dtype, image height) -> (relaxed, optimized) p99 thresholds in us.
# The harness applies the same thresholds with and without max-pool.
CS149_THRESHOLDS_US = {
    ("float32", 224): (4964.0, 4596.0),
    ("float16", 224): (1365.0, 1002.0),
    ("float32", 32): (110.0, 110.0),
    ("float16", 32): (84.0, 84.0),
}

_DTYPE_TAG = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Case:
    """One kernel invocation: shapes, dtype and what to do with it.

    ``params`` holds the shape parameters (see ``shape_summary``); ``level`` is the
    smallest shape set that contains the case; ``threshold_us`` is the CS149
    (relaxed, optimized) p99 pair where one applies.
    """

    kernel: str
    name: str
    params: tuple
    dtype: str
    level: str
    correctness: bool = True
    bench: bool = False
    threshold_us: tuple | None = None
    tags: tuple = field(default_factory=tuple)

    @property
    def p(self) -> dict:
        return dict(self.params)

    @property
    def case_id(self) -> str:
        return f"{self.kernel}/{self.name}"

    def flops(self) -> float:
        """Useful floating-point operations (2 per multiply-add)."""
        p = self.p
        if self.kernel == "conv2d":
            ho, wo = p["H"] - p["K"] + 1, p["W"] - p["K"] + 1
            return 2.0 * p["B"] * p["C_out"] * ho * wo * p["C_in"] * p["K"] * p["K"]
        if self.kernel == "matmul":
            return 2.0 * p["K"] * p["M"] * p["N"]
        causal_factor = 0.5 if p["causal"] else 1.0
        return 4.0 * p["B"] * p["H"] * p["Sq"] * p["Sk"] * p["D"] * causal_factor

    def sim_ok(self) -> bool:
        """Small enough to also run through the NumPy interpreter in a test."""
        return self.flops() <= 4e9

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "name": self.name, "params": self.p,
                "dtype": self.dtype, "level": self.level, "correctness": self.correctness,
                "bench": self.bench, "threshold_us": list(self.threshold_us) if self.threshold_us else None,
                "flops": self.flops()}


def _conv(level, B, C_in, C_out, H, W, K=3, pool=1, bias=True, dtype="float32",
          correctness=True, bench=False, threshold=None):
    name = (f"b{B}_ci{C_in}_co{C_out}_h{H}_w{W}_k{K}_p{pool}"
            f"{'' if bias else '_nobias'}_{_DTYPE_TAG[dtype]}")
    params = (("B", B), ("C_in", C_in), ("C_out", C_out), ("H", H), ("W", W), ("K", K),
              ("pool_size", pool), ("bias", bias))
    return Case("conv2d", name, params, dtype, level, correctness, bench, threshold)


def _matmul(level, K, M, N, dtype, correctness=True, bench=True):
    name = f"k{K}_m{M}_n{N}_{_DTYPE_TAG[dtype]}"
    return Case("matmul", name, (("K", K), ("M", M), ("N", N)), dtype, level, correctness, bench)


def _attention(level, B, H, S, D, causal, dtype, correctness=True, bench=True):
    name = f"b{B}_h{H}_s{S}_d{D}_{'causal' if causal else 'full'}_{_DTYPE_TAG[dtype]}"
    params = (("B", B), ("H", H), ("Sq", S), ("Sk", S), ("D", D), ("causal", causal))
    return Case("attention", name, params, dtype, level, correctness, bench)


def _build() -> list[Case]:
    cases: list[Case] = []
    # -- conv2d ----------------------------------------------------------------------
    cases += [
        _conv("quick", 1, 128, 128, 32, 16, pool=1, bench=True,
              threshold=CS149_THRESHOLDS_US[("float32", 32)]),
        _conv("quick", 1, 128, 128, 32, 16, pool=2, bench=True,
              threshold=CS149_THRESHOLDS_US[("float32", 32)]),
    ]
    # CS149 correctness: small images, every channel combination, no bias.
    for c_in in (128, 256):
        for c_out in (128, 256):
            cases.append(_conv("cs149", 4, c_in, c_out, 32, 16, bias=False))
    # CS149 correctness: large images; no bias, bias, bias + max-pool.
    cases += [
        _conv("cs149", 4, 256, 256, 224, 224, bias=False),
        _conv("cs149", 4, 256, 256, 224, 224, bias=True),
        _conv("cs149", 4, 256, 256, 224, 224, pool=2, bias=True),
    ]
    # CS149 performance (graded 224x224, extra-credit 32x16): B=1, 256->256, with bias.
    for h, w in ((224, 224), (32, 16)):
        for dtype in ("float32", "float16"):
            for pool in (1, 2):
                cases.append(_conv("cs149", 1, 256, 256, h, w, pool=pool, dtype=dtype,
                                   correctness=False, bench=True,
                                   threshold=CS149_THRESHOLDS_US[(dtype, h)]))
    # Extended shapes: channel counts that are not 128-multiples, bigger kernels, bf16.
    cases += [
        _conv("full", 2, 64, 128, 28, 28, pool=2),
        _conv("full", 1, 384, 512, 56, 56, pool=1, bench=True),
        _conv("full", 2, 128, 256, 20, 24, K=5, pool=2),
        _conv("full", 1, 256, 256, 112, 112, pool=2, dtype="float16", bench=True),
    ]
    # -- matmul ------------------------------------------------------------------------
    cases += [
        _matmul("quick", 128, 128, 512, "float32"),
        _matmul("cs149", 1024, 1024, 1024, "bfloat16"),
        _matmul("full", 512, 256, 1024, "float32"),
        _matmul("full", 2048, 2048, 2048, "bfloat16"),
        _matmul("full", 4096, 4096, 4096, "bfloat16", correctness=False),
    ]
    # -- attention ---------------------------------------------------------------------
    cases += [
        _attention("quick", 1, 1, 128, 64, False, "float32"),
        _attention("cs149", 1, 1, 512, 128, False, "bfloat16"),
        _attention("cs149", 1, 1, 512, 128, True, "bfloat16"),
        _attention("full", 2, 2, 256, 64, True, "float32"),
        _attention("full", 1, 4, 1024, 128, False, "bfloat16"),
        _attention("full", 1, 1, 4096, 128, False, "bfloat16", correctness=False),
        _attention("full", 1, 1, 4096, 128, True, "bfloat16", correctness=False),
    ]
    return cases


ALL_CASES: tuple[Case, ...] = tuple(_build())


def parse_kernels(spec: str | None) -> tuple[str, ...]:
    """``"conv2d,matmul"`` or ``"all"``/None -> kernel names; raises ValueError naming the bad one."""
    if spec is None or spec.strip() in ("", "all"):
        return KERNELS
    names = tuple(s.strip() for s in spec.split(",") if s.strip())
    for n in names:
        if n not in KERNELS:
            raise ValueError(f"unknown kernel {n!r}; allowed: {', '.join(KERNELS)} or 'all'")
    return names


def select(kernels: str | tuple | None = None, shapes: str = "quick", *,
           correctness: bool | None = None, bench: bool | None = None) -> list[Case]:
    """Cases of the given kernels whose level is within ``shapes``.

    ``correctness``/``bench`` = True keep only cases with that role.
    """
    if shapes not in SHAPE_SETS:
        raise ValueError(f"unknown shape set {shapes!r}; allowed: {', '.join(SHAPE_SETS)}")
    names = parse_kernels(kernels) if not isinstance(kernels, tuple) else kernels
    depth = SHAPE_SETS.index(shapes)
    out = [c for c in ALL_CASES
           if c.kernel in names and SHAPE_SETS.index(c.level) <= depth]
    if correctness is not None:
        out = [c for c in out if c.correctness == correctness]
    if bench is not None:
        out = [c for c in out if c.bench == bench]
    return out


def get_case(kernel: str, name: str) -> Case:
    for c in ALL_CASES:
        if c.kernel == kernel and c.name == name:
            return c
    known = ", ".join(c.name for c in ALL_CASES if c.kernel == kernel) or "none"
    raise KeyError(f"no case {name!r} for kernel {kernel!r}; known: {known}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="List the hardware cases of a shape set.")
    ap.add_argument("--kernels", default="all")
    ap.add_argument("--shapes", default="quick", choices=SHAPE_SETS)
    ap.add_argument("--bench-only", action="store_true", help="only cases that are benchmarked")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    a = ap.parse_args(argv)
    try:
        cases = select(a.kernels, a.shapes, bench=True if a.bench_only else None)
    except ValueError as e:
        print(f"shapes.py: {e}", file=sys.stderr)
        return 2
    for c in cases:
        print(json.dumps(c.to_dict()) if a.json else f"{c.kernel} {c.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
