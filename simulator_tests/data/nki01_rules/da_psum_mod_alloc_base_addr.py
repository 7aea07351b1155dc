"""da.psum_base: ncc.psum.mod_alloc's base_addr and base_partition must be 0 (one physical tile per bank)."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "da.psum_base"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/nki_direct_allocation_guide.rst 'Known Limitations' 2; "
    "general/nki/api/nki/compiler/psum.py mod_alloc"
)
CODE = "E030"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    m = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    r = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    p = nl.ndarray(  # <- blame
        (nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0, base_addr=1024)
    )
    s[...] = nl.load(xT)
    m[...] = nl.load(y)
    p[...] = nisa.nc_matmul(s, m)
    r[...] = nisa.tensor_copy(p)
    nl.store(out, r)
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    m = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    r = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    p = nl.ndarray((nl.par_dim(128), 256), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=1))
    s[...] = nl.load(xT)
    m[...] = nl.load(y)
    p[...] = nisa.nc_matmul(s, m)
    r[...] = nisa.tensor_copy(p)
    nl.store(out, r)
    return out


def reference(xT, y):
    return xT.T @ y
