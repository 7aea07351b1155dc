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
"""
from __future__ import annotations

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

P = 128   # partitions (nl.tile_size.pmax on trn2)
F = 64    # free size of the small tiles


@dataclass(frozen=True)
class Construct:
    """One smoke-test item: a jitted kernel, its seeded inputs and the NumPy reference."""

    name: str
    used_by: str          # which kernels rely on the construct
    flag: str | None      # kernel flag that avoids it, None when nothing does
    kernel: object
    shapes: tuple         # input shapes (float32 standard normals, seed 0)
    reference: object     # NumPy function of the inputs
    dtype: str = "float32"
    positive: tuple = ()  # indices of inputs drawn as 1 + |normal| (divisors)

    def inputs(self):
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
        nisa.dma_copy(dst=a, src=lhs_t[k * P:(k + 1) * P, :])
        nisa.dma_copy(dst=b, src=rhs[k * P:(k + 1) * P, :])
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
    nisa.activation(dst=e, op=nl.exp, data=t, bias=b, reduce_op=nl.add, reduce_res=s,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.dma_copy(dst=out[:, 0:F], src=e)
    nisa.dma_copy(dst=out[:, F:F + 1], src=s)
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


def _exp_ref(x, s):
    e = np.exp(x + s)
    return np.concatenate([e, e.sum(axis=1, keepdims=True)], axis=1)


def _recip_ref(x, d):
    return x / d


CONSTRUCTS = [
    Construct("dma_shared_hbm_out", "conv2d, matmul, attention", None, dma_shared_hbm_out,
              ((P, 512),), lambda x: x),
    Construct("matmul_accumulate", "conv2d, matmul, attention", None, matmul_accumulate,
              ((2 * P, P), (2 * P, F)), lambda a, b: a.T.astype(np.float64) @ b),
    Construct("tensor_engine_transpose", "attention", None, tensor_engine_transpose,
              ((P, P),), lambda x: x.T),
    Construct("row_max", "attention", None, row_max, ((P, F),),
              lambda x: x.max(axis=1, keepdims=True)),
    Construct("exp_bias_row_sum", "attention", None, exp_bias_row_sum, ((P, F), (P, 1)), _exp_ref),
    Construct("reciprocal_multiply", "attention", None, reciprocal_multiply, ((P, F), (P, 1)), _recip_ref,
              positive=(1,)),
]
