"""Kernels in the style of the NKI tutorials (spec §15, subsets 3 and 4), written for the tests
against the real `neuronxcc.nki` import names: an mgrid/nl.matmul tiled matmul that adds PSUM
tiles into an SBUF accumulator, and an SPMD (batch, head) attention with high-level nl ops."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def tutorial_matmul(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    i_k, i_m = nl.mgrid[0:128, 0:128]
    j_k, j_n = nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            for kb in nl.sequential_range(K // 256):              # K blocks of 2 tiles
                res_psum = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
                for kk in nl.affine_range(2):
                    k = kb * 2 + kk
                    a = nl.load(lhsT[k * 128 + i_k, m * 128 + i_m])
                    b = nl.load(rhs[k * 128 + j_k, n * 512 + j_n])
                    res_psum += nl.matmul(a, b, transpose_x=True)
                acc += res_psum                                   # SBUF += PSUM tile (VectorE add)
            o_p, o_f = nl.mgrid[0:128, 0:512]
            nl.store(out[m * 128 + o_p, n * 512 + o_f], value=nl.copy(acc, dtype=rhs.dtype))
    return out


@nki.jit
def tiny_causal_attention(q, k, v, scale):
    """q, k, v (B, H, 128, D) -> softmax(q k^T * scale, causal) v, one SPMD instance per (b, h)."""
    b, h = nl.program_id(0), nl.program_id(1)
    S, D = q.shape[2], q.shape[3]
    out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    qT = nl.load_transpose2d(q[b, h], dtype=nl.float32)          # (D, S)
    kT = nl.load_transpose2d(k[b, h], dtype=nl.float32)
    vv = nl.load(v[b, h], dtype=nl.float32)                       # (S, D)
    s = nl.matmul(qT, kT, transpose_x=True)                       # (S, S) in PSUM
    i_q, i_k = nl.mgrid[0:S, 0:S]
    s_masked = nisa.affine_select(i_q >= i_k, nl.multiply(s, scale), nl.fp32.min)
    m = nl.max(s_masked, axis=1)
    neg_m = nl.multiply(m, -1.0)
    p = nisa.activation(nl.exp, s_masked, bias=neg_m)
    l = nl.sum(p, axis=[1])
    pT = nisa.tensor_copy(nisa.nc_transpose(p))
    o = nl.matmul(pT, vv, transpose_x=True)                       # (S, D)
    nl.store(out[b, h], nl.divide(o, l))
    return out


def reference(q, k, v, scale):
    s = np.einsum("bhqd,bhkd->bhqk", q, k).astype(np.float64) * scale
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
