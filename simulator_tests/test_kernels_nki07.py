"""The NKI 0.7 kernels (``*_nki07.py``) on the interpreter's 0.7 front end, against the same
oracles, shapes and tolerances as the NKI 0.1 kernels' tests (imported from them, so the two
generations cannot drift apart), and estimated by the same cost model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import test_attention as t01_attention
import test_conv2d as t01_conv
import test_matmul as t01_matmul

from nki_kernels.kernels import attention as attn01
from nki_kernels.kernels import conv2d as conv01
from nki_kernels.kernels import matmul as mm01
from nki_kernels.kernels import registry
from nki_kernels.oracles import attention_ref, conv2d_maxpool_ref, matmul_mk_ref, matmul_ref
from nki_kernels.sim import SimOptions, trace_kernel
from sim_testing import assert_close, strict_interpreter  # noqa: F401  (autouse fixture)

DTYPES = t01_matmul.DTYPES


@pytest.fixture(scope="module")
def k07():
    """The 0.7 modules; under the tests' NKI_BACKEND=sim their ``nki`` is the interpreter's."""
    from nki_kernels.backend import resolve
    from nki_kernels.kernels import attention_nki07, conv2d_nki07, matmul_nki07, smoke_nki07

    b = resolve("0.7")
    assert b.name == "sim", "the simulator tests run the 0.7 kernels on the interpreter"
    return SimpleNamespace(
        nki=b.nki, matmul=matmul_nki07, conv=conv2d_nki07, attention=attention_nki07, smoke=smoke_nki07
    )


def run(k07, kernel, *args, strict=True, **kwargs):
    """One run in the interpreter, strict (hardware-unproven constructs are errors)."""
    return k07.nki.simulate(kernel, options=SimOptions(strict=strict))(*args, **kwargs)


# ------------------------------------------------------------------------- matmul
@pytest.mark.parametrize("shape", t01_matmul.SHAPES, ids=t01_matmul._shape_id)
def test_matmul_fp32_shapes(k07, rng, shape):
    M, N, K = shape
    a, b = t01_matmul._operands(rng, M, N, K, np.float32)
    out = run(k07, k07.matmul.matmul, a, b)
    assert out.dtype == np.float32
    assert_close(out, matmul_ref(a, b), np.float32)


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(128, 512, 128), (127, 513, 129), (300, 1100, 700)], ids=t01_matmul._shape_id)
def test_matmul_low_precision(k07, rng, shape, dt):
    M, N, K = shape
    a, b = t01_matmul._operands(rng, M, N, K, DTYPES[dt])
    out = run(k07, k07.matmul.matmul, a, b)
    assert out.dtype == np.dtype(DTYPES[dt])
    assert_close(out, matmul_ref(a, b), DTYPES[dt])


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
@pytest.mark.parametrize(
    "shape", [(128, 512, 128), (1, 1, 1), (129, 513, 257), (260, 600, 520)], ids=t01_matmul._shape_id
)
def test_matmul_mk_matches_oracle(k07, rng, shape, dt):
    M, N, K = shape
    a, b = t01_matmul._operands(rng, M, N, K, DTYPES[dt], mk=True)
    out = run(k07, k07.matmul.matmul_mk, a, b)
    assert_close(out, matmul_mk_ref(a, b), DTYPES[dt])


@pytest.mark.parametrize("kernel", ["matmul", "matmul_mk"])
@pytest.mark.parametrize(
    "mode, budget, shape", [("resident", 40 * 1024, (640, 1100, 300)), ("chunked", 24 * 1024, (200, 700, 1200))]
)
def test_matmul_multi_block_plans(k07, rng, monkeypatch, kernel, mode, budget, shape):
    """Several SBUF blocks (resident) and K streamed in chunks, at simulable sizes: the shared
    plan with a smaller budget, exactly as the 0.1 tests do."""
    M, N, K = shape
    monkeypatch.setattr(mm01, "SBUF_BUDGET", budget)
    plan = mm01.plan_matmul(M, N, K, 4, transpose_lhs=kernel == "matmul_mk")
    assert plan.resident == (mode == "resident") and len(plan.m_blocks) * len(plan.n_blocks) >= 2, plan
    a, b = t01_matmul._operands(rng, M, N, K, np.float32, mk=kernel == "matmul_mk")
    out = run(k07, getattr(k07.matmul, kernel), a, b)
    ref = matmul_mk_ref(a, b) if kernel == "matmul_mk" else matmul_ref(a, b)
    assert_close(out, ref, np.float32)


@pytest.mark.parametrize("kernel", ["matmul", "matmul_mk"])
@pytest.mark.parametrize("name,make,match", t01_matmul.BAD, ids=[b[0] for b in t01_matmul.BAD])
def test_matmul_rejects_bad_input_like_the_01_kernel(k07, monkeypatch, kernel, name, make, match):
    """Same ValueError as the 0.1 kernel, raised on the host before the kernel is compiled."""
    a, b = make()
    if kernel == "matmul_mk" and isinstance(a, np.ndarray) and a.ndim == 2:
        a = np.ascontiguousarray(a.T)
    entry = getattr(k07.matmul, kernel)
    calls = []
    monkeypatch.setattr(entry, "kernel", lambda *x, **y: calls.append(x))
    with pytest.raises(ValueError, match=match):
        entry(a, b)
    assert not calls, "the kernel ran before argument validation"


# ------------------------------------------------------------------------- conv2d
def _conv_case(k07, rng, B, C_in, C_out, H, W, KH, KW, pool, dtype="fp32", bias=True):
    X, Wt, b = t01_conv._inputs(rng, B, C_in, C_out, H, W, KH, KW, dtype, bias)
    out = run(k07, k07.conv.fused_conv2d_maxpool, X, Wt, b, pool_size=pool)
    assert out.dtype == X.dtype
    assert_close(out, conv2d_maxpool_ref(X, Wt, b, pool), X.dtype)


@pytest.mark.parametrize("case", t01_conv.SMALL, ids=[t01_conv._case_id(*c, "fp32") for c in t01_conv.SMALL])
def test_conv2d_cs149_small(k07, rng, case):
    _conv_case(k07, rng, *case)


@pytest.mark.parametrize("case", t01_conv.CS149_SMALL, ids=lambda c: c.name)
def test_conv2d_cs149_harness_shapes(k07, case):
    args, kwargs = registry.CONV2D.make_inputs(case)
    out = run(k07, k07.conv.fused_conv2d_maxpool, *args, **kwargs)
    assert out.dtype == args[0].dtype
    assert_close(out, registry.CONV2D.reference(args, kwargs), case.dtype)


@pytest.mark.parametrize("case", t01_conv.EXTENDED, ids=[t01_conv._case_id(*c) for c in t01_conv.EXTENDED])
def test_conv2d_extended(k07, rng, case):
    _conv_case(k07, rng, *case)


@pytest.mark.slow
@pytest.mark.parametrize("case", t01_conv.GRID, ids=t01_conv._grid_id)
def test_conv2d_shape_grid(k07, rng, case):
    """The 0.1 tests' shape grid (narrow C_out tiles, several weight groups, tiny channels)."""
    C_in, C_out, K, dt, pool = case
    H = K + 2 * pool + 1
    _conv_case(k07, rng, 1, C_in, C_out, H, H + 2, K, K, pool, dt)


@pytest.mark.parametrize("name", list(t01_conv.BAD), ids=list(t01_conv.BAD))
def test_conv2d_rejects_bad_input_like_the_01_kernel(k07, monkeypatch, name):
    args, match = t01_conv.BAD[name]
    entry = k07.conv.fused_conv2d_maxpool
    calls = []
    monkeypatch.setattr(entry, "kernel", lambda *x, **y: calls.append(x))
    with pytest.raises(ValueError, match=match):
        entry(args["X"], args["W"], args["bias"], pool_size=args["pool_size"])
    assert not calls


# ------------------------------------------------------------------------- attention
@pytest.mark.parametrize("case", t01_attention.CASES, ids=t01_attention._id)
def test_attention_fp32_matches_oracle(k07, rng, case):
    B, H, Sq, Sk, D, causal = case
    q, k, v = t01_attention._inputs(rng, B, H, Sq, Sk, D, np.float32)
    out = run(k07, k07.attention.flash_attention, q, k, v, causal=causal)
    assert out.dtype == np.float32
    assert_close(out, attention_ref(q, k, v, causal=causal), np.float32)


@pytest.mark.parametrize("dt_name", ["bf16", "fp16"])
@pytest.mark.parametrize("case", t01_attention.LOWP_CASES, ids=t01_attention._id)
def test_attention_low_precision(k07, rng, case, dt_name):
    dt = t01_attention.DTYPES[dt_name]
    B, H, Sq, Sk, D, causal = case
    q, k, v = t01_attention._inputs(rng, B, H, Sq, Sk, D, dt)
    out = run(k07, k07.attention.flash_attention, q, k, v, causal=causal)
    assert out.dtype == np.dtype(dt)
    assert_close(out, attention_ref(q, k, v, causal=causal), dt)


@pytest.mark.parametrize(
    "scale,causal",
    [(0.5, False), (2.0, True), (0.0, True), (-0.3, True)],
    ids=["s0.5", "s2_causal", "s0_causal", "sneg0.3_causal"],
)
def test_attention_explicit_softmax_scale(k07, rng, scale, causal):
    q, k, v = t01_attention._inputs(rng, 1, 1, 700, 1100, 32, np.float32)
    out = run(k07, k07.attention.flash_attention, q, k, v, causal=causal, softmax_scale=scale)
    assert_close(out, attention_ref(q, k, v, causal=causal, softmax_scale=scale), np.float32)


@pytest.mark.parametrize("make,kwargs,match", [b[1:] for b in t01_attention.BAD], ids=[b[0] for b in t01_attention.BAD])
def test_attention_rejects_bad_input_like_the_01_kernel(k07, monkeypatch, make, kwargs, match):
    q, k, v = make()
    entry = k07.attention.flash_attention
    calls = []
    monkeypatch.setattr(entry, "kernel", lambda *x, **y: calls.append(x))
    with pytest.raises(ValueError, match=match):
        entry(q, k, v, **kwargs)
    assert not calls


def test_attention_refuses_the_01_dma_transpose_flag(k07, monkeypatch):
    monkeypatch.setattr(attn01, "USE_DMA_TRANSPOSE", True)
    q, k, v = t01_attention._arrs()
    with pytest.raises(ValueError, match="USE_DMA_TRANSPOSE"):
        k07.attention.flash_attention(q, k, v)


# ------------------------------------------------------------------------- same plan, same work
def _work(trace):
    """Per (op, engine): instruction count, flops and bytes, memsets left out (the 0.1 kernels
    zero PSUM with nl.zeros, the 0.7 ones start each accumulation with accumulate=False)."""
    out = {}
    for ev in trace.events:
        if ev.op == "memset" and ev.writes and ev.writes[0].buffer == "psum":
            continue
        key = (ev.op, ev.engine)
        n, f, b = out.get(key, (0, 0, 0))
        out[key] = (n + 1, f + ev.flops, b + ev.bytes)
    return out


WORK_CASES = [
    ("matmul", lambda rng: t01_matmul._operands(rng, 640, 1100, 300, np.float32), {}),
    ("conv", lambda rng: t01_conv._inputs(rng, 2, 130, 129, 14, 12, 3, 3, "bf16"), {"pool_size": 3}),
    ("conv", lambda rng: t01_conv._inputs(rng, 1, 128, 128, 32, 16, 3, 3), {"pool_size": 2}),
    ("attention", lambda rng: t01_attention._inputs(rng, 1, 2, 520, 1100, 64, np.float32), {"causal": True}),
]
KERNELS_01 = {"matmul": mm01.matmul, "conv": conv01.fused_conv2d_maxpool, "attention": attn01.flash_attention}


@pytest.mark.parametrize("which,make,kwargs", WORK_CASES, ids=[f"{w}{i}" for i, (w, _, _) in enumerate(WORK_CASES)])
def test_07_kernels_issue_the_01_kernels_work(k07, rng, which, make, kwargs):
    """Same plan, same instructions: per op and engine the two generations issue the same
    number of instructions, flops and bytes (PSUM memsets aside), and agree numerically."""
    args = make(rng)
    out01, tr01 = trace_kernel(KERNELS_01[which], *args, **kwargs)
    entry = {
        "matmul": k07.matmul.matmul,
        "conv": k07.conv.fused_conv2d_maxpool,
        "attention": k07.attention.flash_attention,
    }[which]
    out07, tr07 = k07.nki.trace(entry, *args, options=SimOptions(strict=True), **kwargs)
    assert _work(tr07) == _work(tr01)
    assert_close(out07, np.asarray(out01, np.float64), np.asarray(out01).dtype, what="0.7 vs 0.1")


# ------------------------------------------------------------------------- smoke constructs
def test_smoke_constructs_run_to_their_references(k07):
    """The hardware smoke test's kernels are legal NKI 0.7 (strict interpreter) and their NumPy
    references are right: each runs to its reference here."""
    names = []
    for c in k07.smoke.CONSTRUCTS:
        args = c.inputs()
        out = run(k07, c.kernel, *args)
        assert_close(out, c.reference(*[np.asarray(a, np.float64) for a in args]), c.dtype, what=c.name)
        names.append(c.name)
    assert len(set(names)) == len(names) >= 6
