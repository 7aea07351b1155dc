"""First-hardware-run smoke test of the NKI 0.7 constructs the ``*_nki07`` kernels rely on.

One tiny ``@nki.jit`` kernel per construct, each compared with NumPy.  ``python -m
nki_kernels.hw.nki07_path smoke`` runs them on the device before any kernel job (run_hw.sh),
so that a construct the hardware rejects or computes differently is named within a minute,
together with the kernels that use it and the kernel flag that avoids it (``flag``; ``None``
when no flag does).  In CI the same kernels run on the interpreter (``install_nki_alias``),
which proves that they are legal 0.7 code and that the references are right.

Every construct follows the NKI 0.6 API reference (aws-neuron-sdk 81ce03ae,
``nki/api/nki/isa/__init__.py``; the 0.7 API pages are not in the pinned documentation):

- ``dma_shared_hbm_out``: ``dma_copy(dst, src)`` HBM -> SBUF -> an ``nl.shared_hbm`` output
  that the kernel returns (``nki/migration``: outputs must be ``shared_hbm``).
- ``matmul_accumulate``: two K tiles into one PSUM tile with explicit ``accumulate=False`` then
  ``True`` (``nc_matmul``: ``accumulate`` overwrites / accumulates), evicted by ``tensor_copy``.
- ``tensor_engine_transpose``: ``nc_transpose`` SBUF -> PSUM on TensorE (``dst`` dtype = ``data``
  dtype), 128 x 128.
- ``row_max``: ``tensor_reduce(op=maximum, axis=1, keepdims=True)`` on VectorE.
- ``exp_bias_row_sum``: ``activation(op=exp, bias=(P,1) tile, reduce_op=add,
  reduce_res=(P,1), reduce_cmd=reset_reduce)`` on ScalarE: softmax's numerator and row sum in
  one instruction.
- ``reciprocal_multiply``: ``reciprocal`` of a (P,1) column, then ``tensor_scalar(op0=multiply,
  operand0=(P,1) tile)``: division without a divide instruction.
- ``nkiobject_argument``: a kernel argument that is an ``nl.NKIObject`` dataclass of ints and
  tuples (language guide, "Class Support"): how every 0.7 kernel here receives its plan.
- ``matmul_3d_moving``: ``nc_matmul`` with a 3-D moving view (K, rows, columns) of a window
  and a 3-D PSUM destination (conv's shifted-window matmuls).
- ``psum_ap_max_pool``: ``tensor_reduce(max)`` of PSUM read through ``.ap()`` as
  (P, rows, cols/2, 2), then of the SBUF result through an ``.ap()`` that puts the window rows
  last (conv's 2x2 max-pool).
- ``causal_affine_select``: ``affine_select(pattern=[[-1, n]], channel_multiplier=1,
  cmp_op=greater_equal)`` keeping the lower triangle (attention's causal mask).

The first six are the building blocks of every public NKI 0.7 kernel; the last four are what
the 0.7 kernels here add, and public hardware-run code does not show in that form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nki_kernels.backend import resolve
from nki_kernels.kernels._nki07 import HostEntry

nki, nl, nisa = resolve("0.7").modules  # the real `nki` on a device, the interpreter elsewhere

P = 128  # partitions (nl.tile_size.pmax on trn2)
F = 64  # free size of the small tiles


@dataclass(frozen=True)
class Construct:
    """One smoke-test item: a jitted kernel, its seeded inputs and the NumPy reference."""

    name: str
    used_by: str  # which kernels rely on the construct
    flag: str | None  # kernel flag that avoids it, None when nothing does
    kernel: object
    shapes: tuple  # input shapes (float32 standard normals, seed 0)
    reference: object  # NumPy function of the inputs
    dtype: str = "float32"
    positive: tuple = ()  # indices of inputs drawn as 1 + |normal| (divisors)

    def inputs(self) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal(s, dtype=np.float32) for s in self.shapes]
        return tuple(1 + np.abs(x) if i in self.positive else x for i, x in enumerate(xs))


@nki.jit
def dma_shared_hbm_out(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def matmul_accumulate(lhs_t, rhs):
    """lhs_t (2P, P), rhs (2P, F): out = lhs_t.T @ rhs, contracted over two 128-row tiles."""
    out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
    for k in range(2):
        a = nl.ndarray((P, P), dtype=lhs_t.dtype, buffer=nl.sbuf)
        b = nl.ndarray((P, F), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhs_t[k * P : (k + 1) * P, :])
        nisa.dma_copy(dst=b, src=rhs[k * P : (k + 1) * P, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=k > 0)
    res = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def tensor_engine_transpose(x):
    out = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    tp = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=tp, data=t, engine=nisa.engine.tensor)
    res = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=tp)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def row_max(x):
    out = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    m = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1, keepdims=True)
    nisa.dma_copy(dst=out, src=m)
    return out


@nki.jit
def exp_bias_row_sum(x, neg_shift):
    """[exp(x + neg_shift) | row sum of it]: x (P, F), neg_shift (P, 1) -> (P, F + 1)."""
    out = nl.ndarray((P, F + 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=b, src=neg_shift)
    e = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(
        dst=e, op=nl.exp, data=t, bias=b, reduce_op=nl.add, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce
    )
    nisa.dma_copy(dst=out[:, 0:F], src=e)
    nisa.dma_copy(dst=out[:, F : F + 1], src=s)
    return out


@nki.jit
def reciprocal_multiply(x, d):
    """x / d with d a (P, 1) column: reciprocal on VectorE, then a per-partition multiply."""
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    c = nl.ndarray((P, 1), dtype=d.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=c, src=d)
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=c)
    res = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=res, data=t, op0=nl.multiply, operand0=r)
    nisa.dma_copy(dst=out, src=res)
    return out


@dataclass
class _Cfg(nl.NKIObject):  # type: ignore[name-defined]  # nl: the resolved API module
    """A plan-like kernel argument: ints and a tuple of (start, size) spans."""

    rows: int
    spans: tuple


@nki.jit
def nkiobject_argument(x, cfg):
    """Copies the row spans ``cfg.spans`` of x (P, F) through SBUF: x's rows, in span order."""
    out = nl.ndarray((cfg.rows, F), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0, n in cfg.spans:
        t = nl.ndarray((n, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0 : r0 + n, :])
        nisa.dma_copy(dst=out[r0 : r0 + n, :], src=t)
    return out


# passed the way the kernels pass their plans: a host entry adds the object
_nkiobject_kernel = HostEntry(
    lambda x: ((x, _Cfg(rows=P, spans=((0, 64), (64, 40), (104, 24)))), {}), nkiobject_argument, "nkiobject_argument"
)


@nki.jit
def matmul_3d_moving(w, x):
    """w (C, M) stationary, x (C, R + 2, Q + 2) window: out[m, r, q] = sum_c w[c, m] * x[c, r + 1, q + 2]."""
    M, (C, R2, Q2) = w.shape[1], x.shape
    R, Q = R2 - 2, Q2 - 2
    out = nl.ndarray((M, R, Q), dtype=nl.float32, buffer=nl.shared_hbm)
    wt = nl.ndarray((C, M), dtype=w.dtype, buffer=nl.sbuf)
    xt = nl.ndarray((C, R2, Q2), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    nisa.dma_copy(dst=xt, src=x)
    ps = nl.ndarray((M, R, Q), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=wt, moving=xt[:, 1 : 1 + R, 2 : 2 + Q], accumulate=False)
    res = nl.ndarray((M, R, Q), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def psum_ap_max_pool(w, x):
    """2x2 max-pool of w.T @ x read out of PSUM: w (K, P), x (K, R*Q) -> (P, R/2, Q/2)."""
    K, R, Q = x.shape[0], 8, x.shape[1] // 8
    out = nl.ndarray((P, R // 2, Q // 2), dtype=nl.float32, buffer=nl.shared_hbm)
    wt = nl.ndarray((K, P), dtype=w.dtype, buffer=nl.sbuf)
    xt = nl.ndarray((K, R * Q), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    nisa.dma_copy(dst=xt, src=x)
    ps = nl.ndarray((P, R, Q), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=wt, moving=xt, accumulate=False)
    cols = nl.ndarray((P, R, Q // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=cols, op=nl.maximum, axis=3, data=ps.ap(pattern=[[R * Q, P], [Q, R], [2, Q // 2], [1, 2]]))
    mx = nl.ndarray((P, R // 2, Q // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(
        dst=mx, op=nl.maximum, axis=3, data=cols.ap(pattern=[[R * (Q // 2), P], [Q, R // 2], [1, Q // 2], [Q // 2, 2]])
    )
    nisa.dma_copy(dst=out, src=mx)
    return out


@nki.jit
def causal_affine_select(x):
    """x (P, P) with the strict upper triangle (column > row) replaced by -100."""
    out = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    m = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
    nisa.affine_select(
        dst=m,
        pattern=[[-1, P]],
        channel_multiplier=1,
        on_true_tile=t,
        on_false_value=-100.0,
        cmp_op=nl.greater_equal,
        offset=0,
    )
    nisa.dma_copy(dst=out, src=m)
    return out


def _pool_ref(w, x):
    y = (w.T.astype(np.float64) @ x).reshape(P, 8, -1)
    return y.reshape(P, 4, 2, y.shape[2] // 2, 2).max(axis=(2, 4))


def _exp_ref(x, s):
    e = np.exp(x + s)
    return np.concatenate([e, e.sum(axis=1, keepdims=True)], axis=1)


def _recip_ref(x, d):
    return x / d


CONSTRUCTS = [
    Construct("dma_shared_hbm_out", "conv2d, matmul, attention", None, dma_shared_hbm_out, ((P, 512),), lambda x: x),
    Construct(
        "matmul_accumulate",
        "conv2d, matmul, attention",
        None,
        matmul_accumulate,
        ((2 * P, P), (2 * P, F)),
        lambda a, b: a.T.astype(np.float64) @ b,
    ),
    Construct("tensor_engine_transpose", "attention", None, tensor_engine_transpose, ((P, P),), lambda x: x.T),
    Construct("row_max", "attention", None, row_max, ((P, F),), lambda x: x.max(axis=1, keepdims=True)),
    Construct("exp_bias_row_sum", "attention", None, exp_bias_row_sum, ((P, F), (P, 1)), _exp_ref),
    Construct(
        "reciprocal_multiply", "attention", None, reciprocal_multiply, ((P, F), (P, 1)), _recip_ref, positive=(1,)
    ),
    Construct(
        "nkiobject_argument", "conv2d, matmul, attention (their plans)", None, _nkiobject_kernel, ((P, F),), lambda x: x
    ),
    Construct(
        "matmul_3d_moving",
        "conv2d",
        None,
        matmul_3d_moving,
        ((64, P), (64, 6, 12)),
        lambda w, x: np.einsum("cm,crq->mrq", w.astype(np.float64), x[:, 1:5, 2:12]),
    ),
    Construct(
        "psum_ap_max_pool",
        "conv2d (pool_size > 1)",
        "pool_size=1",
        psum_ap_max_pool,
        ((64, P), (64, 8 * 16)),
        _pool_ref,
    ),
    Construct(
        "causal_affine_select",
        "attention (causal=True)",
        "causal=False",
        causal_affine_select,
        ((P, P),),
        lambda x: np.where(np.tril(np.ones((P, P), bool)), x, -100.0),
    ),
]
