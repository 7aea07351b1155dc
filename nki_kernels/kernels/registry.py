"""The one registry of the project's kernels: entry points, oracles, inputs, shapes, thresholds.

Every consumer enumerates kernels and shapes from here: ``nki-kernels verify`` (cli.py), the
cost-model table (``perf/bench.py``) and ``profile`` (``perf/cli.py``), the hardware job
(``nki_kernels/hw``, ``hw_tests/``) and the tests.  One frozen :class:`KernelSpec` per kernel:

- entry points of both NKI generations, the float64 oracle and the kernel's tiling plan, as
  ``module:function`` strings (nothing is imported until asked: importing this module needs only
  the standard library, so the hardware job can plan before anything is installed);
- the input builder (:meth:`KernelSpec.make_inputs`: seeded, in the case's dtype) and the
  argument shapes alone (:meth:`KernelSpec.arg_shapes`);
- named shape sets (:data:`SET_NAMES`): the CS149 set, the ``verify`` / ``verify-quick`` sets,
  the ``headline`` shapes of the cost-model table (with their goals) and the nested hardware
  sets ``hw-quick`` < ``hw-cs149`` < ``hw-full`` (each case checked for correctness,
  benchmarked, or both);
- the CS149 thresholds (:data:`CS149_THRESHOLDS_US`);
- :meth:`KernelSpec.check_feasible`: rejects, from the sizes alone and before anything is
  allocated, a shape whose inputs and output do not fit a trn2 device's HBM or whose tiles do
  not fit on chip (the kernel's own tiling plan, run on shape stand-ins).

It also holds the dtype vocabulary every module shares (:func:`dtype_name`, :func:`np_dtype`).

``python -m nki_kernels.kernels.registry [--set NAME] [--kernels LIST] [--json]`` lists a set.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

KERNELS: tuple[str, ...] = ("conv2d", "matmul", "attention")
APIS: tuple[str, ...] = ("0.1", "0.7")
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
DTYPE_TAG: Mapping[str, str] = MappingProxyType({"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"})
ITEMSIZE: Mapping[str, int] = MappingProxyType({"float32": 4, "float16": 2, "bfloat16": 2})

HW_SETS: tuple[str, ...] = ("quick", "cs149", "full")  # hardware sets, each containing the previous
SET_NAMES: tuple[str, ...] = ("cs149", "verify-quick", "verify", "headline", "hw-quick", "hw-cs149", "hw-full")

# One trn2 device's HBM (trn2-hardware.md, "HBM": 96 GiB, 4 stacks): a kernel whose inputs and
# output exceed it cannot run on one device, whatever its tiling.
HBM_BYTES = 96 * 2**30

# CS149 Assignment 4 part 2 grading thresholds: (dtype, image height) -> (relaxed, optimized) p99
# in microseconds, ``performance_requirements_by_dtype_size`` of stanford-cs149/asst4-trainium2
# ``part2/test_harness.py`` @67a1f8bf; the harness applies them with and without max-pool, on
# B=1, 256 -> 256 channels, 3x3, 224x224 (graded) and 32x16 (extra credit) images.
CS149_THRESHOLDS_US: Mapping[tuple[str, int], tuple[float, float]] = MappingProxyType(
    {
        ("float32", 224): (4964.0, 4596.0),
        ("float16", 224): (1365.0, 1002.0),
        ("float32", 32): (110.0, 110.0),
        ("float16", 32): (84.0, 84.0),
    }
)
CS149_IMAGES: Mapping[int, int] = MappingProxyType({224: 224, 32: 16})  # height -> width in the harness
CS149_SOURCE = "stanford-cs149/asst4-trainium2 part2/test_harness.py @67a1f8bf"


class ShapeError(ValueError):
    """A shape the kernel cannot run: the message names the limit (one line)."""


# ------------------------------------------------------------------------------- dtypes
def dtype_name(d: Any) -> str:
    """``"float32"`` for ``"float32"``, ``np.float32``, ``np.dtype("float32")``, ``nl.float32`` (either
    NKI generation, real or interpreted), ``torch.float32``, ``ml_dtypes.bfloat16``, ...

    NumPy-compatible dtypes (NKI 0.1's are NumPy dtypes, bf16 included: aws-neuron-sdk @49ee15c5
    ``general/nki/api/nki/language/__init__.py``) go through ``np.dtype``; anything else (torch, NKI 0.7
    ``DType``) by its name, as nki-library compares dtypes (``str(dtype)``, nki-library @d2ad3a5
    ``src/nkilib_src/nkilib/core/utils/allocator.py``).
    """
    if not isinstance(d, str):
        try:
            import numpy as np  # here: the registry imports with the standard library only

            return str(np.dtype(d).name)
        except (TypeError, ValueError):
            d = str(d)
    s = d.strip()
    if s.startswith("torch."):
        s = s[len("torch.") :]
    if s.startswith("dtype(") and s.endswith(")"):
        s = s[len("dtype(") : -1].strip("'\"")
    return s


def np_dtype(name: str) -> Any:
    """The NumPy dtype of a dtype name (bf16 from ml_dtypes)."""
    import numpy as np  # here: the registry imports with the standard library only

    if dtype_name(name) == "bfloat16":
        import ml_dtypes  # here: the registry imports with the standard library only

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype_name(name))


# ------------------------------------------------------------------------------- cases
Params = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Goal:
    """A performance goal of a headline shape, judged on the cost-model estimate.

    ``kind``: ``latency_us`` (estimate <= value), ``mfu_pct`` (estimated MFU >= value percent) or
    ``causal_ratio`` (this causal case's estimate <= value x the non-causal case of the same shape).
    """

    kind: str
    value: float

    @property
    def text(self) -> str:
        if self.kind == "latency_us":
            return f"<= {self.value:,} us"
        if self.kind == "mfu_pct":
            return f"MFU >= {self.value}%"
        return f"<= {self.value}x non-causal"


@dataclass(frozen=True)
class Case:
    """One kernel invocation: the kernel, its size parameters and its dtype (its identity), plus what
    a shape set says about it (not part of equality): ``level`` (the smallest hardware set holding
    it, "" when none), the hardware roles ``correctness`` / ``bench``, verify's ``label``, the
    cost-model table's ``key`` and ``goal``."""

    kernel: str
    params: Params
    dtype: str
    level: str = field(default="", compare=False)
    correctness: bool = field(default=True, compare=False)
    bench: bool = field(default=False, compare=False)
    label: str = field(default="", compare=False)
    key: str = field(default="", compare=False)
    goal: Goal | None = field(default=None, compare=False)

    @property
    def p(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def name(self) -> str:
        """Canonical name: sizes and dtype (results folders and ``--case`` use it)."""
        p, tag = self.p, DTYPE_TAG.get(self.dtype, self.dtype)
        if self.kernel == "conv2d":
            return (
                f"b{p['B']}_ci{p['C_in']}_co{p['C_out']}_h{p['H']}_w{p['W']}_k{p['K']}_p{p['pool_size']}"
                f"{'' if p['bias'] else '_nobias'}_{tag}"
            )
        if self.kernel == "matmul":
            return f"k{p['K']}_m{p['M']}_n{p['N']}_{tag}"
        seq = f"s{p['Sq']}" if p["Sq"] == p["Sk"] else f"q{p['Sq']}_k{p['Sk']}"
        return f"b{p['B']}_h{p['H']}_{seq}_d{p['D']}_{'causal' if p['causal'] else 'full'}_{tag}"

    @property
    def case_id(self) -> str:
        return f"{self.kernel}/{self.name}"

    def describe(self) -> str:
        """Human-readable sizes (verify's shape column), with the label when there is one."""
        p = self.p
        if self.kernel == "conv2d":
            text = (
                f"B{p['B']} {p['C_in']}->{p['C_out']} {p['H']}x{p['W']} k{p['K']} pool{p['pool_size']}"
                f"{'' if p['bias'] else ' no bias'}"
            )
        elif self.kernel == "matmul":
            text = f"K{p['K']} M{p['M']} N{p['N']}"
        else:
            seq = f"S{p['Sq']}" if p["Sq"] == p["Sk"] else f"Sq{p['Sq']} Sk{p['Sk']}"
            text = f"B{p['B']} H{p['H']} {seq} D{p['D']}{' causal' if p['causal'] else ''}"
        return f"{text} ({self.label})" if self.label else text

    @property
    def cs149_thresholds_us(self) -> tuple[float, float] | None:
        """(relaxed, optimized) CS149 p99 thresholds for a conv of the harness's image sizes."""
        if self.kernel != "conv2d":
            return None
        p = self.p
        if CS149_IMAGES.get(p["H"]) != p["W"]:
            return None
        return CS149_THRESHOLDS_US.get((self.dtype, p["H"]))

    @property
    def threshold_us(self) -> tuple[float, float] | None:
        """The CS149 thresholds a benchmarked hardware case is reported against (None otherwise)."""
        return self.cs149_thresholds_us if self.bench else None

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "name": self.name,
            "params": self.p,
            "dtype": self.dtype,
            "level": self.level,
            "correctness": self.correctness,
            "bench": self.bench,
            "threshold_us": list(self.threshold_us) if self.threshold_us else None,
            "flops": self.flops(),
        }


# ------------------------------------------------------------------------------- per-kernel facts
def _conv_shapes(p: Mapping[str, Any]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], dict[str, Any]]:
    ho, wo = (p["H"] - p["K"] + 1) // p["pool_size"], (p["W"] - p["K"] + 1) // p["pool_size"]
    return (
        ((p["B"], p["C_in"], p["H"], p["W"]), (p["C_out"], p["C_in"], p["K"], p["K"]), (p["C_out"],)),
        (p["B"], p["C_out"], max(ho, 0), max(wo, 0)),
        {"pool_size": p["pool_size"]},
    )


def _matmul_shapes(p: Mapping[str, Any]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], dict[str, Any]]:
    return ((p["K"], p["M"]), (p["K"], p["N"])), (p["M"], p["N"]), {}


def _attention_shapes(p: Mapping[str, Any]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], dict[str, Any]]:
    q, kv = (p["B"], p["H"], p["Sq"], p["D"]), (p["B"], p["H"], p["Sk"], p["D"])
    return (q, kv, kv), q, {"causal": p["causal"]}


def _conv_inputs(p: Mapping[str, Any], dtype: str, rng: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The CS149 harness's inputs: uniform [0, 1) images, weights and bias (``np.random.rand``), a
    zero bias when the case has none."""
    import numpy as np  # here: the registry imports with the standard library only

    (xs, ws, bs), _, kw = _conv_shapes(p)
    dt = np_dtype(dtype)
    x = rng.random(xs, dtype=np.float32)
    w = rng.random(ws, dtype=np.float32)
    b = rng.random(bs, dtype=np.float32) if p["bias"] else np.zeros(bs, np.float32)
    # copy=False: an fp32 case uses the drawn arrays as they are (a second 205 MB image copy at CS149 224x224)
    return (x.astype(dt, copy=False), w.astype(dt, copy=False), b.astype(dt, copy=False)), kw


def _normal_inputs(shapes: Callable[[Mapping[str, Any]], Any]) -> Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]:
    def make(p: Mapping[str, Any], dtype: str, rng: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        import numpy as np  # here: the registry imports with the standard library only

        arg_shapes, _, kw = shapes(p)
        dt = np_dtype(dtype)
        return tuple(rng.standard_normal(s, dtype=np.float32).astype(dt, copy=False) for s in arg_shapes), kw

    return make


def _conv_plan_args(case: Case, args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, ...]:
    x, w, bias = args
    return x, w, bias, kw["pool_size"]


def _matmul_plan_args(case: Case, args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, ...]:
    p = case.p
    return p["M"], p["N"], p["K"], ITEMSIZE[case.dtype]


def _attention_plan_args(case: Case, args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, ...]:
    q, k, v = args
    return q, k, v, kw["causal"], None


class HostSpec:
    """What the kernels' checks and tiling plans read of an argument: its shape and its dtype as a
    NumPy dtype, without the data (the feasibility check's stand-ins; a 0.7 host entry's view of a
    torch or NKI tensor, ``kernels/_nki07.host_spec``)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape, self.dtype = shape, dtype


@dataclass(frozen=True)
class KernelSpec:
    """Everything the project states about one kernel (see the module docstring)."""

    name: str  # "conv2d": the hardware job's and the tests' name
    title: str  # verify's kernel column
    cli_name: str  # ``nki-kernels profile`` argument
    entry_01: str  # module:function of the NKI 0.1 kernel
    entry_07: str  # module:function of the NKI 0.7 kernel
    oracle: str  # module:function of the float64 NumPy reference
    plan: str  # module:function of the kernel's tiling plan: a ValueError when the tiles do not fit on chip
    params: tuple[str, ...]  # a Case's parameter names, in order
    cli_params: tuple[str, ...]  # what ``profile --shape`` holds, in order
    cli_dims: str  # help text of ``--shape``
    default_dtype: str  # ``profile`` without ``--dtype``
    default_key: str  # the headline case ``profile`` estimates without ``--shape``
    shapes_of: Callable[[Mapping[str, Any]], Any]  # params -> (arg shapes, output shape, kwargs)
    inputs_of: Callable[..., Any]  # (params, dtype, rng) -> (args, kwargs)
    plan_args: Callable[..., tuple[Any, ...]]  # (case, arg stand-ins, kwargs) -> the plan's arguments
    shape_sets: Mapping[str, tuple[Case, ...]]
    cs149_thresholds_us: Mapping[tuple[str, int], tuple[float, float]] | None = None

    # -- entry points
    def entry(self, api: str = "0.1") -> str:
        if api not in APIS:
            raise ValueError(f"unknown NKI API {api!r}; allowed: {', '.join(APIS)}")
        return self.entry_01 if api == "0.1" else self.entry_07

    def load(self, api: str = "0.1") -> Any:
        """The kernel function of NKI generation ``api`` (imports its module)."""
        return resolve_target(self.entry(api))

    def load_oracle(self) -> Any:
        return resolve_target(self.oracle)

    # -- shapes
    def case(self, dtype: str, **params: Any) -> Case:
        """A Case of this kernel from named parameters (every one of ``self.params``)."""
        missing = [n for n in self.params if n not in params]
        extra = [n for n in params if n not in self.params]
        if missing or extra:
            raise ValueError(
                f"{self.name}: parameters {', '.join(self.params)} expected"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(extra)}" if extra else "")
            )
        return Case(self.name, tuple((n, params[n]) for n in self.params), dtype_name(dtype))

    def case_from_cli(
        self, values: Iterable[int], dtype: str | None = None, *, pool: int | None = None, causal: bool = False
    ) -> Case:
        """The Case of ``profile KERNEL --shape v1,v2,...`` (``cli_params`` order)."""
        values = tuple(values)
        if len(values) != len(self.cli_params):
            raise ShapeError(
                f"{self.cli_name} takes {len(self.cli_params)} values ({self.cli_dims}), got {len(values)}"
            )
        named: dict[str, Any] = dict(zip(self.cli_params, values, strict=True))
        if self.name == "conv2d":
            named.update(pool_size=1 if pool is None else pool, bias=True)
        elif self.name == "attention":
            seq = named.pop("S")
            named.update(Sq=seq, Sk=seq, causal=bool(causal))
        return self.case(dtype or self.default_dtype, **named)

    def cli_values(self, case: Case) -> tuple[int, ...]:
        """The ``profile --shape`` values of a case (inverse of :meth:`case_from_cli`)."""
        p = case.p
        return tuple(int(p["Sq"] if n == "S" else p[n]) for n in self.cli_params)

    def default_case(self) -> Case:
        """The headline case ``profile`` estimates when no ``--shape`` is given."""
        return next(c for c in self.cases("headline") if c.key == self.default_key)

    def cases(self, set_name: str) -> tuple[Case, ...]:
        if set_name not in SET_NAMES:
            raise ValueError(f"unknown shape set {set_name!r}; allowed: {', '.join(SET_NAMES)}")
        return self.shape_sets.get(set_name, ())

    # -- inputs
    def arg_shapes(self, case: Case) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], dict[str, Any]]:
        """(argument shapes, output shape, keyword arguments) of a case, from its sizes alone."""
        return self.shapes_of(case.p)

    def make_inputs(self, case: Case, seed: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Seeded inputs ``(args, kwargs)`` in the case's dtype: conv2d as the CS149 harness draws
        them (uniform [0, 1), zero bias when the case has none), matmul and attention standard
        normals."""
        import numpy as np  # here: the registry imports with the standard library only

        return self.inputs_of(case.p, case.dtype, np.random.default_rng(seed))

    def reference(self, args: Iterable[Any], kwargs: Mapping[str, Any]) -> Any:
        """The oracle's float64 output for these inputs."""
        import numpy as np  # here: the registry imports with the standard library only

        return np.asarray(self.load_oracle()(*[np.asarray(a, dtype=np.float64) for a in args], **kwargs))

    # -- feasibility
    def hbm_bytes(self, case: Case) -> int:
        """Bytes of the inputs and the output in HBM."""
        args, out, _ = self.arg_shapes(case)
        return sum(math.prod(s) for s in (*args, out)) * ITEMSIZE[case.dtype]

    def check_feasible(self, case: Case) -> None:
        """Raise :class:`ShapeError` (one line naming the limit) when ``case`` cannot run: a size
        below 1, an unknown dtype, inputs and output beyond one trn2 device's HBM, or tiles that do
        not fit on chip (the kernel's own plan, run on shape stand-ins: nothing is allocated)."""
        if case.kernel != self.name:
            raise ValueError(f"case of {case.kernel!r} given to the {self.name!r} spec")
        what = f"{self.cli_name} {case.name}"
        for n, v in case.params:
            if isinstance(v, bool):
                continue
            if not isinstance(v, int) or v < 1:
                raise ShapeError(f"{what}: {n} = {v!r}; every size must be an integer >= 1")
        if case.dtype not in DTYPES:
            raise ShapeError(f"{what}: dtype {case.dtype!r}; allowed: {', '.join(DTYPES)}")
        need = self.hbm_bytes(case)
        if need > HBM_BYTES:
            raise ShapeError(
                f"{what}: inputs and output need {need / 2**30:,.1f} GiB of HBM; one trn2 device "
                f"has {HBM_BYTES // 2**30} GiB"
            )
        args, _, kw = self.arg_shapes(case)
        dt = np_dtype(case.dtype)
        try:
            resolve_target(self.plan)(*self.plan_args(case, tuple(HostSpec(s, dt) for s in args), kw))
        except ValueError as e:
            raise ShapeError(f"{what}: {e}") from None


def resolve_target(target: str) -> Any:
    """The object named by ``module:attribute``."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"bad target {target!r}: use module:function")
    return getattr(importlib.import_module(module), attr)


# ------------------------------------------------------------------------------- the shapes
def _conv(
    B: int,
    C_in: int,
    C_out: int,
    H: int,
    W: int,
    K: int = 3,
    pool: int = 1,
    bias: bool = True,
    dtype: str = "float32",
    **meta: Any,
) -> Case:
    params = (
        ("B", B),
        ("C_in", C_in),
        ("C_out", C_out),
        ("H", H),
        ("W", W),
        ("K", K),
        ("pool_size", pool),
        ("bias", bias),
    )
    return Case("conv2d", params, dtype, **meta)


def _matmul(K: int, M: int, N: int, dtype: str, **meta: Any) -> Case:
    return Case("matmul", (("K", K), ("M", M), ("N", N)), dtype, **meta)


def _attention(B: int, H: int, S: int, D: int, causal: bool, dtype: str, **meta: Any) -> Case:
    return Case("attention", (("B", B), ("H", H), ("Sq", S), ("Sk", S), ("D", D), ("causal", causal)), dtype, **meta)


def _cs149_conv() -> tuple[Case, ...]:
    """The CS149 part 2 harness's shapes (``test_harness.py`` @67a1f8bf): correctness at B=4, 3x3,
    on 32x16 images for every 128/256 channel pair (no bias, no pool) and on 224x224 images with
    256 channels (no bias; bias; bias + 2x2 max-pool); performance at B=1, 256 -> 256, with bias,
    FP32 and FP16, pool 1 and 2, on 224x224 (graded) and 32x16 (extra credit)."""
    lv = "cs149"
    cases = [_conv(4, ci, co, 32, 16, bias=False, level=lv) for ci in (128, 256) for co in (128, 256)]
    cases += [
        _conv(4, 256, 256, 224, 224, bias=False, level=lv),
        _conv(4, 256, 256, 224, 224, bias=True, level=lv),
        _conv(4, 256, 256, 224, 224, pool=2, bias=True, level=lv),
    ]
    cases += [
        _conv(1, 256, 256, h, w, pool=pool, dtype=dt, correctness=False, bench=True, level=lv)
        for h, w in CS149_IMAGES.items()
        for dt in ("float32", "float16")
        for pool in (1, 2)
    ]
    return tuple(cases)


def _sets(
    *,
    hardware: Iterable[Case],
    verify_quick: tuple[Case, ...],
    verify: tuple[Case, ...],
    headline: tuple[Case, ...],
    cs149: tuple[Case, ...] = (),
) -> Mapping[str, tuple[Case, ...]]:
    """The named sets of one kernel; the hardware sets nest by each case's ``level``."""
    hw = tuple(hardware)
    out = {"cs149": cs149, "verify-quick": verify_quick, "verify": verify, "headline": headline}
    for i, level in enumerate(HW_SETS):
        out[f"hw-{level}"] = tuple(c for c in hw if HW_SETS.index(c.level) <= i)
    return MappingProxyType(out)


_CS149 = _cs149_conv()

_CONV_VERIFY = (
    _conv(4, 128, 128, 32, 16, 3, 1, dtype="float32", label="CS149 small"),
    _conv(4, 256, 256, 32, 16, 3, 2, dtype="float32", label="CS149 small, pool 2"),
    _conv(1, 3, 64, 20, 20, 5, 2, dtype="float16", label="C_in 3, 5x5"),
    _conv(1, 129, 130, 12, 600, 3, 1, dtype="bfloat16", label="partial tiles, wide rows"),
)
CONV2D = KernelSpec(
    name="conv2d",
    title="conv2d+bias+maxpool",
    cli_name="conv",
    entry_01="nki_kernels.kernels.conv2d:fused_conv2d_maxpool",
    entry_07="nki_kernels.kernels.conv2d_nki07:fused_conv2d_maxpool",
    oracle="nki_kernels.oracles:conv2d_maxpool_ref",
    plan="nki_kernels.kernels.conv2d:plan_conv",
    params=("B", "C_in", "C_out", "H", "W", "K", "pool_size", "bias"),
    cli_params=("B", "C_in", "C_out", "H", "W", "K"),
    cli_dims="B,C_in,C_out,H,W,K",
    default_dtype="float16",
    default_key="conv224_fp16_p1",
    shapes_of=_conv_shapes,
    inputs_of=_conv_inputs,
    plan_args=_conv_plan_args,
    cs149_thresholds_us=CS149_THRESHOLDS_US,
    shape_sets=_sets(
        hardware=[
            _conv(1, 128, 128, 32, 16, pool=1, bench=True, level="quick"),
            _conv(1, 128, 128, 32, 16, pool=2, bench=True, level="quick"),
            *_CS149,
            # beyond CS149: channels that are not 128-multiples, bigger filters, fp16
            _conv(2, 64, 128, 28, 28, pool=2, level="full"),
            _conv(1, 384, 512, 56, 56, pool=1, bench=True, level="full"),
            _conv(2, 128, 256, 20, 24, K=5, pool=2, level="full"),
            _conv(1, 256, 256, 112, 112, pool=2, dtype="float16", bench=True, level="full"),
        ],
        cs149=_CS149,
        verify_quick=_CONV_VERIFY,
        verify=(*_CONV_VERIFY, _conv(4, 256, 256, 224, 224, 3, 1, dtype="float32", label="CS149 large")),
        headline=(
            _conv(1, 256, 256, 224, 224, 3, 1, dtype="float16", key="conv224_fp16_p1", goal=Goal("latency_us", 800)),
            _conv(1, 256, 256, 224, 224, 3, 2, dtype="float16", key="conv224_fp16_p2", goal=Goal("latency_us", 800)),
            _conv(1, 256, 256, 224, 224, 3, 1, dtype="float32", key="conv224_fp32_p1", goal=Goal("latency_us", 3300)),
            _conv(1, 256, 256, 224, 224, 3, 2, dtype="float32", key="conv224_fp32_p2", goal=Goal("latency_us", 3300)),
            _conv(1, 256, 256, 32, 16, 3, 1, dtype="float16", key="conv32x16_fp16", goal=Goal("latency_us", 50)),
            _conv(1, 256, 256, 32, 16, 3, 1, dtype="float32", key="conv32x16_fp32", goal=Goal("latency_us", 90)),
        ),
    ),
)

_MATMUL_VERIFY = (
    _matmul(512, 256, 1024, "float32"),
    _matmul(1000, 300, 700, "bfloat16"),
    _matmul(129, 1, 513, "float16"),
)
MATMUL = KernelSpec(
    name="matmul",
    title="matmul",
    cli_name="matmul",
    entry_01="nki_kernels.kernels.matmul:matmul",
    entry_07="nki_kernels.kernels.matmul_nki07:matmul",
    oracle="nki_kernels.oracles:matmul_ref",
    plan="nki_kernels.kernels.matmul:plan_matmul",
    params=("K", "M", "N"),
    cli_params=("K", "M", "N"),
    cli_dims="K,M,N (lhsT is K x M, rhs K x N)",
    default_dtype="bfloat16",
    default_key="matmul2048_bf16",
    shapes_of=_matmul_shapes,
    inputs_of=_normal_inputs(_matmul_shapes),
    plan_args=_matmul_plan_args,
    shape_sets=_sets(
        hardware=[
            _matmul(128, 128, 512, "float32", bench=True, level="quick"),
            _matmul(1024, 1024, 1024, "bfloat16", bench=True, level="cs149"),
            _matmul(512, 256, 1024, "float32", bench=True, level="full"),
            _matmul(2048, 2048, 2048, "bfloat16", bench=True, level="full"),
            _matmul(4096, 4096, 4096, "bfloat16", correctness=False, bench=True, level="full"),
        ],
        verify_quick=_MATMUL_VERIFY,
        verify=(*_MATMUL_VERIFY, _matmul(2048, 2048, 2048, "float32")),
        headline=(
            _matmul(4096, 4096, 4096, "bfloat16", key="matmul4096_bf16", goal=Goal("mfu_pct", 90)),
            _matmul(2048, 2048, 2048, "bfloat16", key="matmul2048_bf16", goal=Goal("mfu_pct", 88)),
        ),
    ),
)

_ATTENTION_VERIFY = (
    _attention(1, 2, 512, 64, False, "float32"),
    _attention(1, 1, 1000, 128, True, "bfloat16"),
    _attention(2, 1, 129, 32, True, "float16"),
)
ATTENTION = KernelSpec(
    name="attention",
    title="flash_attention",
    cli_name="attention",
    entry_01="nki_kernels.kernels.attention:flash_attention",
    entry_07="nki_kernels.kernels.attention_nki07:flash_attention",
    oracle="nki_kernels.oracles:attention_ref",
    plan="nki_kernels.kernels.attention:plan_attention",
    params=("B", "H", "Sq", "Sk", "D", "causal"),
    cli_params=("B", "H", "S", "D"),
    cli_dims="B,H,S,D (q, k, v are B x H x S x D)",
    default_dtype="bfloat16",
    default_key="attn4096_bf16",
    shapes_of=_attention_shapes,
    inputs_of=_normal_inputs(_attention_shapes),
    plan_args=_attention_plan_args,
    shape_sets=_sets(
        hardware=[
            _attention(1, 1, 128, 64, False, "float32", bench=True, level="quick"),
            _attention(1, 1, 512, 128, False, "bfloat16", bench=True, level="cs149"),
            _attention(1, 1, 512, 128, True, "bfloat16", bench=True, level="cs149"),
            _attention(2, 2, 256, 64, True, "float32", bench=True, level="full"),
            _attention(1, 4, 1024, 128, False, "bfloat16", bench=True, level="full"),
            _attention(1, 1, 4096, 128, False, "bfloat16", correctness=False, bench=True, level="full"),
            _attention(1, 1, 4096, 128, True, "bfloat16", correctness=False, bench=True, level="full"),
        ],
        verify_quick=_ATTENTION_VERIFY,
        verify=(*_ATTENTION_VERIFY, _attention(1, 1, 4096, 128, False, "bfloat16")),
        headline=(
            _attention(1, 1, 4096, 128, False, "bfloat16", key="attn4096_bf16", goal=Goal("latency_us", 160)),
            _attention(1, 1, 4096, 128, True, "bfloat16", key="attn4096_bf16_causal", goal=Goal("causal_ratio", 0.6)),
        ),
    ),
)

SPECS: tuple[KernelSpec, ...] = (CONV2D, MATMUL, ATTENTION)
_BY_NAME: Mapping[str, KernelSpec] = MappingProxyType({**{s.cli_name: s for s in SPECS}, **{s.name: s for s in SPECS}})


# ------------------------------------------------------------------------------- lookups
def get(name: str) -> KernelSpec:
    """The spec of a kernel by its name (``conv2d``) or its ``profile`` name (``conv``)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; allowed: {', '.join(KERNELS)}") from None


def parse_kernels(spec: str | None) -> tuple[str, ...]:
    """``"conv2d,matmul"`` or ``"all"`` / None -> kernel names (registry order kept as given).
    Raises ValueError naming the bad entry; an empty list is an error, not "all"."""
    if spec is None or spec.strip() == "all":
        return KERNELS
    names = tuple(s.strip() for s in spec.split(",") if s.strip())
    if not names:
        raise ValueError(f"empty kernel list {spec!r}; give kernel names ({', '.join(KERNELS)}) or 'all'")
    for n in names:
        if n not in KERNELS:
            raise ValueError(f"unknown kernel {n!r}; allowed: {', '.join(KERNELS)} or 'all'")
    return tuple(dict.fromkeys(names))


def select(
    kernels: str | Iterable[str] | None = None,
    shapes: str = "quick",
    *,
    correctness: bool | None = None,
    bench: bool | None = None,
) -> list[Case]:
    """Hardware cases of the given kernels in hardware set ``shapes`` (quick | cs149 | full);
    ``correctness`` / ``bench`` = True keep only cases with that role."""
    if shapes not in HW_SETS:
        raise ValueError(f"unknown shape set {shapes!r}; allowed: {', '.join(HW_SETS)}")
    names = parse_kernels(kernels) if kernels is None or isinstance(kernels, str) else tuple(kernels)
    out = [c for n in names for c in get(n).cases(f"hw-{shapes}")]
    if correctness is not None:
        out = [c for c in out if c.correctness == correctness]
    if bench is not None:
        out = [c for c in out if c.bench == bench]
    return out


def all_cases(kernel: str | None = None) -> list[Case]:
    """Every case of every set (a case in several sets once, hardware sets first)."""
    seen: dict[Case, Case] = {}
    for spec in SPECS if kernel is None else (get(kernel),):
        for set_name in ("hw-full", *SET_NAMES):
            for c in spec.cases(set_name):
                seen.setdefault(c, c)
    return list(seen.values())


def get_case(kernel: str, name: str) -> Case:
    """The case named ``name`` of ``kernel`` (a hardware case when it is one)."""
    cases = all_cases(kernel)
    for c in cases:
        if c.name == name:
            return c
    known = ", ".join(c.name for c in cases if c.level) or "none"
    raise KeyError(f"no case {name!r} for kernel {kernel!r}; known hardware cases: {known}")


# ------------------------------------------------------------------------------- listing
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nki_kernels.kernels.registry", description="List a shape set of the kernel registry."
    )
    ap.add_argument("--set", default="hw-quick", choices=SET_NAMES, help="shape set (default hw-quick)")
    ap.add_argument("--kernels", default="all", help="comma-separated kernel names or 'all'")
    ap.add_argument("--bench-only", action="store_true", help="only benchmarked (hardware) cases")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    a = ap.parse_args(argv)
    try:
        names = parse_kernels(a.kernels)
    except ValueError as e:
        print(f"registry: {e}", file=sys.stderr)
        return 2
    for n in names:
        for c in get(n).cases(a.set):
            if a.bench_only and not c.bench:
                continue
            print(json.dumps(c.to_dict()) if a.json else f"{c.kernel} {c.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
