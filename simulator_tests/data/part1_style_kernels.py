"""Kernels in the style of CS149 part 1 (vector add naive/tiled/stream, TensorE transpose),
written for the tests against the real `neuronxcc.nki` import names (spec §15, first subset)."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.compiler.skip_middle_end_transformations
@nki.jit
def add_naive(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    ta = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((b.shape[0], 1), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)          # (N,) HBM -> (N, 1) SBUF: element-count pairing
    nisa.dma_copy(dst=tb, src=b)
    nisa.dma_copy(dst=out, src=nisa.tensor_tensor(ta, tb, nl.add))
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def add_stream(a, b, free):
    P = nl.tile_size.pmax
    n = a.shape[0]
    a2 = a.reshape((n // (P * free), P, free))
    b2 = b.reshape((n // (P * free), P, free))
    out = nl.ndarray((n // (P * free), P, free), dtype=a.dtype, buffer=nl.hbm)
    for i in nl.affine_range(n // (P * free)):
        ta = nl.ndarray((P, free), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((P, free), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a2[i])
        nisa.dma_copy(dst=tb, src=b2[i])
        nisa.dma_copy(dst=out[i], src=nisa.tensor_tensor(ta, tb, op=nl.add))
    return out.reshape(a.shape)


@nki.compiler.skip_middle_end_transformations
@nki.jit
def add_scalar_columns(a, col):
    P = nl.tile_size.pmax
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    c = nl.ndarray((P, 1), dtype=col.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=col)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(t, nl.add, c))   # positional op/operand
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def transpose(x):
    P = nl.tile_size.pmax
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(rows // P):
        for j in nl.affine_range(cols // P):
            t = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * P:(i + 1) * P, j * P:(j + 1) * P])
            tp = nisa.nc_transpose(t)                     # SBUF -> PSUM on TensorE
            nisa.dma_copy(dst=out[j * P:(j + 1) * P, i * P:(i + 1) * P], src=nisa.tensor_copy(tp))
    return out


@nki.jit
def too_many_partitions(a):
    t = nl.ndarray((256, 1), dtype=a.dtype, buffer=nl.sbuf)
    return a
