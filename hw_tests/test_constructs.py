"""First-hardware-run smoke test: one tiny kernel per construct the three kernels rely on that
public hardware-proven code does not show (or shows only in student code), each compared with
NumPy under ``nki.baremetal``.  ``scripts/run_hw.sh`` runs this file first, so a first trn2 run
turns the remaining unknowns into facts within a minute; a failure names the construct, the
kernel that relies on it and the kernel flag (if any) that avoids it.

Constructs (name: what, who relies on it, evidence so far):
  pool_psum_two_reduces    tensor_reduce(max) over the innermost axis of a reshaped 3-D PSUM tile,
                           then over the single non-innermost axis 2 of the reshaped fp32 SBUF
                           result, then ScalarE activation(copy, bias=) -> fp16.  conv,
                           pool_size > 1.  Evidence: CS149 student solutions (chenhzhu reduces a
                           non-innermost axis of an SBUF tile); the 2.26 docs ask for axes that
                           start at the innermost one.
  evict_psum_3d_bias       activation(copy, data=3-D PSUM tile, bias=(P,1), dtype=fp16).  conv,
                           pool_size 1.  AWS samples evict 2-D PSUM tiles; students use tensor_tensor.
  row_max_from_psum        tensor_reduce(max, PSUM (128, 512) fp32, keepdims) into one column of
                           a 4-D SBUF tile.  attention.
  exp_psum_bias_scale      activation(exp, PSUM, bias=(P,1) fp32, scale=const, dtype=bf16).
                           attention.
  stt_psum_operand1        scalar_tensor_tensor(data=SBUF, multiply by (P,1), add PSUM operand1)
                           (VectorE).  attention's acc update.
  transpose_bf16_psum      nc_transpose of bf16 tiles into slices [:, c, :] of one bf16 PSUM
                           tile, then one tensor_copy on ScalarE.  attention p^T, matmul_mk.
  affine_select_fill       affine_select on an fp32 SBUF slice with a +-3e38 fill, then a row
                           max.  attention, causal (nki-samples use -9984.0 on PSUM).
  reciprocal_multiply      reciprocal of a (P,1) column, tensor_scalar multiply by it with a
                           bf16 cast (VectorE).  attention's normalisation.
  memset_column            memset (VectorE) into a strided column slice of a 3-D tile.
                           attention's [V | 1].
  dma_kmajor_pattern       dma_copy from HBM through an mgrid access pattern
                           src[k0 + t*128 + p, c0 + c] into a (128, t, cols) tile.  matmul.
  dma_transpose_3d         3-D (2, 1, 0) SBUF -> SBUF dma_transpose of a reshaped bf16 view.
                           attention, ONLY with flag USE_DMA_TRANSPOSE (off by default).

Off-device these tests are collected and skipped with their reason (hw_tests/conftest.py).
``simulator_tests/test_hw_constructs.py`` runs every construct kernel through the interpreter
and exercises this file's reporting with the fake SDK (scripts/fakes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from nki_kernels.backend import nisa, nki, nl
from nki_kernels.tolerances import assert_close

pytestmark = pytest.mark.hardware


@dataclass(frozen=True)
class Construct:
    name: str  # short id
    kernel: object  # tiny @nki.jit kernel
    make: object  # rng -> args (NumPy)
    ref: object  # args -> float64 NumPy result
    dtype: str  # output dtype name (tolerance row)
    relied_on_by: str  # which project kernel(s), and when
    avoid: str  # the kernel flag / setting that avoids the construct, or what to change
    flag_only: bool = False  # used only behind a kernel flag that is off by default (the
    # interpreter's strict mode rejects it as hardware-unproven)


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


# ---- conv ------------------------------------------------------------------------------------


@nki.jit
def k_pool_psum_two_reduces(x, w, bias):
    """psum (128, 4, 8) = w.T @ x; out = maxpool2x2(psum) + bias (fp16)."""
    out = nl.ndarray((128, 2, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.sbuf)
    w_sb = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, 1), dtype=bias.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    nisa.dma_copy(dst=w_sb, src=w)
    nisa.dma_copy(dst=b_sb, src=bias)
    ps = nl.zeros((128, 4, 8), dtype=nl.float32, buffer=nl.psum)
    ps += nisa.nc_matmul(w_sb, x_sb)
    cols = nisa.tensor_reduce(nl.max, ps.reshape((128, 4, 4, 2)), axis=3, dtype=nl.float32)
    mx = nisa.tensor_reduce(nl.max, cols.reshape((128, 2, 2, 4)), axis=2, dtype=nl.float32)
    o_sb = nisa.activation(op=nl.copy, data=mx, bias=b_sb, dtype=x.dtype)
    nisa.dma_copy(dst=out, src=o_sb)
    return out


def _ref_pool(x, w, bias):
    c = (w.astype(np.float64).T @ x.astype(np.float64).reshape(128, 32)).reshape(128, 2, 2, 4, 2)
    return c.max(axis=(2, 4)) + bias.astype(np.float64)[:, :, None]


@nki.jit
def k_evict_psum_3d_bias(x, w, bias):
    out = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.sbuf)
    w_sb = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, 1), dtype=bias.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    nisa.dma_copy(dst=w_sb, src=w)
    nisa.dma_copy(dst=b_sb, src=bias)
    ps = nl.zeros((128, 4, 8), dtype=nl.float32, buffer=nl.psum)
    ps += nisa.nc_matmul(w_sb, x_sb)
    o_sb = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.sbuf)
    o_sb[...] = nisa.activation(op=nl.copy, data=ps, bias=b_sb, dtype=x.dtype)
    nisa.dma_copy(dst=out, src=o_sb)
    return out


def _ref_evict(x, w, bias):
    c = (w.astype(np.float64).T @ x.astype(np.float64).reshape(128, 32)).reshape(128, 4, 8)
    return c + bias.astype(np.float64)[:, :, None]


def _conv_args(rng):
    x = rng.standard_normal((128, 4, 8)).astype(np.float16)
    w = (rng.standard_normal((128, 128)) / 11).astype(np.float16)
    b = rng.standard_normal((128, 1)).astype(np.float16)
    return x, w, b


# ---- attention -------------------------------------------------------------------------------


@nki.jit
def k_row_max_from_psum(qT, kT):
    """s = qT.T @ kT (128 x 512 fp32 PSUM); out[:, 0, 1] = row max, written into a column."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    q_sb = nl.ndarray((64, 128), dtype=qT.dtype, buffer=nl.sbuf)
    k_sb = nl.ndarray((64, 512), dtype=kT.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=qT)
    nisa.dma_copy(dst=k_sb, src=kT)
    s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    s[...] = nisa.nc_matmul(q_sb, k_sb)
    ext = nl.ndarray((128, 2, 3, 4), dtype=nl.float32, buffer=nl.sbuf)
    ext[:, 1, 2, 1:2] = nisa.tensor_reduce(nl.max, s, axis=1, keepdims=True)
    nisa.dma_copy(dst=out, src=ext[:, 1, 2, 1:2])
    return out


def _qk_args(rng):
    b = _bf16()
    return rng.standard_normal((64, 128)).astype(b), rng.standard_normal((64, 512)).astype(b)


def _ref_row_max(qT, kT):
    return (qT.astype(np.float64).T @ kT.astype(np.float64)).max(axis=1, keepdims=True)


@nki.jit
def k_exp_psum_bias_scale(qT, kT):
    out = nl.ndarray((128, 512), dtype=qT.dtype, buffer=nl.shared_hbm)
    q_sb = nl.ndarray((64, 128), dtype=qT.dtype, buffer=nl.sbuf)
    k_sb = nl.ndarray((64, 512), dtype=kT.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=qT)
    nisa.dma_copy(dst=k_sb, src=kT)
    s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    s[...] = nisa.nc_matmul(q_sb, k_sb)
    m = nisa.tensor_reduce(nl.max, s, axis=1, keepdims=True)
    neg_m = nisa.tensor_scalar(m, nl.multiply, -0.125, engine=nisa.vector_engine)
    p = nl.ndarray((128, 512), dtype=qT.dtype, buffer=nl.sbuf)
    p[...] = nisa.activation(nl.exp, s, bias=neg_m, scale=0.125, dtype=qT.dtype)
    nisa.dma_copy(dst=out, src=p)
    return out


def _ref_exp(qT, kT):
    s = qT.astype(np.float64).T @ kT.astype(np.float64)
    return np.exp(0.125 * (s - s.max(axis=1, keepdims=True)))


@nki.jit
def k_stt_psum_operand1(acc, alpha, pT, v):
    """out = alpha * acc + pT.T @ v (the [o | l] update; [o | l] read from PSUM)."""
    out = nl.ndarray((128, 129), dtype=nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((128, 129), dtype=nl.float32, buffer=nl.sbuf)
    al_sb = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    p_sb = nl.ndarray((128, 128), dtype=pT.dtype, buffer=nl.sbuf)
    v_sb = nl.ndarray((128, 129), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=acc)
    nisa.dma_copy(dst=al_sb, src=alpha)
    nisa.dma_copy(dst=p_sb, src=pT)
    nisa.dma_copy(dst=v_sb, src=v)
    o_ps = nl.zeros((128, 129), dtype=nl.float32, buffer=nl.psum)
    o_ps += nisa.nc_matmul(p_sb, v_sb)
    a_sb[...] = nisa.scalar_tensor_tensor(data=a_sb, op0=nl.multiply, operand0=al_sb, op1=nl.add, operand1=o_ps)
    nisa.dma_copy(dst=out, src=a_sb)
    return out


def _stt_args(rng):
    b = _bf16()
    return (
        rng.standard_normal((128, 129)).astype(np.float32),
        rng.random((128, 1)).astype(np.float32),
        rng.random((128, 128)).astype(b),
        rng.standard_normal((128, 129)).astype(b),
    )


def _ref_stt(acc, alpha, pT, v):
    return alpha.astype(np.float64) * acc + pT.astype(np.float64).T @ v.astype(np.float64)


@nki.jit
def k_transpose_bf16_psum(p):
    """out = p.T for p (128, 512) bf16: 4 TensorE transposes into one bf16 PSUM tile."""
    out = nl.ndarray((128, 4, 128), dtype=p.dtype, buffer=nl.shared_hbm)
    p_sb = nl.ndarray((128, 512), dtype=p.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=p_sb, src=p)
    pT_ps = nl.ndarray((128, 4, 128), dtype=p.dtype, buffer=nl.psum)
    for c in nl.static_range(4):
        pT_ps[:, c, :] = nisa.nc_transpose(p_sb[:, c * 128 : (c + 1) * 128])
    pT = nl.ndarray((128, 4, 128), dtype=p.dtype, buffer=nl.sbuf)
    pT[...] = nisa.tensor_copy(pT_ps, engine=nisa.scalar_engine)
    nisa.dma_copy(dst=out, src=pT)
    return out


def _ref_transpose(p):
    return p.astype(np.float64).reshape(128, 4, 128).transpose(2, 1, 0)


@nki.jit
def k_affine_select_fill(s):
    """Causal mask (row >= column) of an fp32 SBUF slice with fill -3e38, then the row max."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    ring = nl.ndarray((128, 2, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ring[:, 1, :], src=s)
    i_q = nl.arange(128)[:, None]
    i_k = nl.arange(128)[None, :]
    ring[:, 1, :] = nisa.affine_select(i_q >= i_k, ring[:, 1, :], -3.0e38)
    m = nisa.tensor_reduce(nl.max, ring[:, 1, :], axis=1, keepdims=True)
    nisa.dma_copy(dst=out, src=m)
    return out


def _ref_affine_select(s):
    masked = np.where(np.arange(128)[:, None] >= np.arange(128)[None, :], s.astype(np.float64), -3.0e38)
    return masked.max(axis=1, keepdims=True)


@nki.jit
def k_reciprocal_multiply(acc):
    """out = acc[:, :64] / max(acc[:, 64], 1e-30) as reciprocal + multiply, cast to bf16."""
    out = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((128, 65), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=acc)
    l_safe = nisa.tensor_scalar(a_sb[:, 64:65], nl.maximum, 1e-30, engine=nisa.vector_engine)
    inv_l = nisa.reciprocal(l_safe)
    o = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    o[...] = nisa.tensor_scalar(a_sb[:, 0:64], nl.multiply, inv_l, dtype=nl.bfloat16, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out, src=o)
    return out


def _ref_reciprocal(acc):
    acc = acc.astype(np.float64)
    return acc[:, :64] / np.maximum(acc[:, 64:65], 1e-30)


@nki.jit
def k_memset_column(v):
    """[V | 1]: v (128, 3, 16) loaded into vt[:, :, 0:16], column 16 set to 1.0 by memset."""
    out = nl.ndarray((128, 3, 17), dtype=v.dtype, buffer=nl.shared_hbm)
    vt = nl.ndarray((128, 3, 17), dtype=v.dtype, buffer=nl.sbuf)
    vt[:, :, 16:17] = nisa.memset((128, 3, 1), 1.0, v.dtype, engine=nisa.vector_engine)
    nisa.dma_copy(dst=vt[:, :, 0:16], src=v)
    nisa.dma_copy(dst=out, src=vt)
    return out


def _ref_memset(v):
    return np.concatenate([v.astype(np.float64), np.ones((128, 3, 1))], axis=2)


@nki.jit
def k_dma_transpose_3d(p):
    """p (128 rows, 1024 keys) bf16 -> (128 keys, 8 chunks, 128 rows) by one 3-D DMA transpose."""
    out = nl.ndarray((128, 8, 128), dtype=p.dtype, buffer=nl.shared_hbm)
    ring = nl.ndarray((128, 2, 1024), dtype=p.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ring[:, 1, :], src=p)
    pT = nisa.dma_transpose(ring[:, 1, :].reshape((128, 8, 128)), axes=(2, 1, 0))
    nisa.dma_copy(dst=out, src=pT)
    return out


def _ref_dma_transpose(p):
    return p.astype(np.float64).reshape(128, 8, 128).transpose(2, 1, 0)


# ---- matmul ----------------------------------------------------------------------------------


@nki.jit
def k_dma_kmajor_pattern(a):
    """a (384, 40): three 128-row K tiles of columns 8..39 in one DMA, as (128, 3, 32)."""
    out = nl.ndarray((128, 3, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 3, 32), dtype=a.dtype, buffer=nl.sbuf)
    i_p, i_t, i_c = nl.mgrid[0:128, 0:3, 0:32]
    nisa.dma_copy(dst=t[:, 0:3, 0:32], src=a[i_t * 128 + i_p, 8 + i_c])
    nisa.dma_copy(dst=out, src=t)
    return out


def _ref_kmajor(a):
    return a.astype(np.float64)[:, 8:40].reshape(3, 128, 32).transpose(1, 0, 2)


CONSTRUCTS = [
    Construct(
        "pool_psum_two_reduces",
        k_pool_psum_two_reduces,
        _conv_args,
        _ref_pool,
        "float16",
        "fused_conv2d_maxpool, pool_size > 1",
        "pool_size=1 (then pool on the host); no flag",
    ),
    Construct(
        "evict_psum_3d_bias",
        k_evict_psum_3d_bias,
        _conv_args,
        _ref_evict,
        "float16",
        "fused_conv2d_maxpool, pool_size 1",
        "no flag: evict with tensor_copy + tensor_tensor(add)",
    ),
    Construct(
        "row_max_from_psum",
        k_row_max_from_psum,
        _qk_args,
        _ref_row_max,
        "float32",
        "flash_attention",
        "no flag: copy scores to SBUF before the reduce",
    ),
    Construct(
        "exp_psum_bias_scale",
        k_exp_psum_bias_scale,
        _qk_args,
        _ref_exp,
        "bfloat16",
        "flash_attention",
        "no flag: copy scores to SBUF before the exp",
    ),
    Construct(
        "stt_psum_operand1",
        k_stt_psum_operand1,
        _stt_args,
        _ref_stt,
        "float32",
        "flash_attention (acc update)",
        "no flag: evict [o | l] to SBUF first",
    ),
    Construct(
        "transpose_bf16_psum",
        k_transpose_bf16_psum,
        lambda rng: (rng.random((128, 512)).astype(_bf16()),),
        _ref_transpose,
        "bfloat16",
        "flash_attention (p^T), matmul_mk",
        "no flag: fp32 PSUM transpose tile",
    ),
    Construct(
        "affine_select_fill",
        k_affine_select_fill,
        lambda rng: (rng.standard_normal((128, 128)).astype(np.float32),),
        _ref_affine_select,
        "float32",
        "flash_attention, causal",
        "causal=False; no flag",
    ),
    Construct(
        "reciprocal_multiply",
        k_reciprocal_multiply,
        lambda rng: ((rng.random((128, 65)) + 0.5).astype(np.float32),),
        _ref_reciprocal,
        "bfloat16",
        "flash_attention (normalisation)",
        "no flag",
    ),
    Construct(
        "memset_column",
        k_memset_column,
        lambda rng: (rng.standard_normal((128, 3, 16)).astype(_bf16()),),
        _ref_memset,
        "bfloat16",
        "flash_attention ([V | 1])",
        "no flag",
    ),
    Construct(
        "dma_kmajor_pattern",
        k_dma_kmajor_pattern,
        lambda rng: (rng.standard_normal((384, 40)).astype(np.float32),),
        _ref_kmajor,
        "float32",
        "matmul, matmul_mk (K-major loads)",
        "no flag",
    ),
    Construct(
        "dma_transpose_3d",
        k_dma_transpose_3d,
        lambda rng: (rng.random((128, 1024)).astype(_bf16()),),
        _ref_dma_transpose,
        "bfloat16",
        "flash_attention with USE_DMA_TRANSPOSE=True only",
        "keep attention.USE_DMA_TRANSPOSE = False (the default)",
        flag_only=True,
    ),
]


def check_construct(c: Construct, run) -> None:
    """Run construct ``c`` with ``run(kernel, *args)`` and compare with NumPy; on failure the
    AssertionError names the construct, the kernel relying on it and how to avoid it."""
    args = c.make(np.random.default_rng(0))
    try:
        out = run(c.kernel, *args)
        assert_close(out, c.ref(*args), c.dtype, what=f"construct {c.name}")
    except Exception as e:  # noqa: BLE001  (compile errors are findings too)
        raise AssertionError(
            f"CONSTRUCT FAILED: {c.name} (relied on by {c.relied_on_by}; avoid: {c.avoid}): {type(e).__name__}: {e}"
        ) from e


@pytest.mark.parametrize("construct", CONSTRUCTS, ids=[c.name for c in CONSTRUCTS])
def test_construct_on_device(construct):
    from nki_kernels.hw import device

    check_construct(construct, device.run_baremetal)
