"""ki.psum_operand: nisa.nc_transpose (no engine) of a 128x128 PSUM tile.  Today VectorE is picked for a PSUM
input and the 32x32 limit fails; the compiler would use TensorE and add the PSUM->SBUF copy (known issues: an
ISA call may become several instructions).  A warning by default, an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.psum_operand"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Compiler passes'; isa/__init__.py nc_transpose"
CODE = "E024"
STRICT = True


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 128)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_matmul(nl.load(xT), nl.load(y))
    t = nisa.nc_transpose(p)  # <- blame
    nl.store(out, nl.copy(t))
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_matmul(nl.load(xT), nl.load(y))
    t = nisa.nc_transpose(nisa.tensor_copy(p))
    nl.store(out, nl.copy(t))
    return out


def reference(xT, y):
    return (xT.T @ y).T
