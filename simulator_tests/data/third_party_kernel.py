"""An NKI 0.1-style kernel file written the way users write them: it imports the real
`neuronxcc.nki` names and knows nothing about nki_kernels.  Run by the alias tests and by
`nki-kernels run`."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
from neuronxcc.nki.isa.constants import engine


@nki.compiler.skip_middle_end_transformations
@nki.jit
def scaled_transpose_add(a, b):
    """out = a.T * 2 + b for a (128, 256) and b (256, 128)."""
    P = nl.tile_size.pmax
    out = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.hbm)
    for j in nl.affine_range(a.shape[1] // P):
        t = nl.ndarray((P, P), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * P:(j + 1) * P])
        tt = nisa.tensor_copy(nisa.nc_transpose(t))
        bb = nl.ndarray((P, P), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=bb, src=b[j * P:(j + 1) * P, :])
        r = nisa.tensor_scalar(tt, nl.multiply, 2.0, engine=engine.vector)
        nisa.dma_copy(dst=out[j * P:(j + 1) * P, :], src=nisa.tensor_tensor(r, bb, op=nl.add))
    return out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    b = rng.standard_normal((256, 128)).astype(np.float32)
    got = nki.simulate_kernel(scaled_transpose_add, a, b)
    err = float(np.abs(got - (a.T * 2 + b)).max())
    print(f"third_party_kernel: max abs err {err:.3e}")
    raise SystemExit(0 if err < 1e-5 else 1)
