"""ki.psum_operand: an nc_transpose result (a PSUM tile) passed straight to nisa.nc_matmul, as AWS's flash
attention backward does (`trans_dy = nisa.nc_transpose(...)`, then `nisa.nc_matmul(trans_dy, ...)`).  The ISA
docstring reads matmul operands from SBUF; the known-issues page says an ISA call may become several
instructions (here the PSUM->SBUF copy the compiler adds).  Runs on hardware, costs a copy: a warning by default,
an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.psum_operand"
SOURCE = (
    "nki-samples@0898a77 src/nki_samples/reference/attention.py:999-1002 (_flash_attn_bwd_core, run by "
    "test/unit/test_flash_attn_bwd.py); aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Compiler passes'"
)
CODE = "E024"
STRICT = True


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def bad(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    trans_x = nisa.nc_transpose(nl.load(x))
    r = nisa.nc_matmul(trans_x, nl.load(y))  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    trans_x = nisa.tensor_copy(nisa.nc_transpose(nl.load(x)))
    r = nisa.nc_matmul(trans_x, nl.load(y))
    nl.store(out, nl.copy(r))
    return out


def reference(x, y):
    return x @ y
