"""accept: an nc_matmul result assigned straight into an SBUF tile.  TensorE writes PSUM only, and the front end
keeps it so: the result lands in PSUM and the assignment becomes a copy (an eviction) into the SBUF tile.

This case was the rejecting form `isa_matmul_memory__v2_sbuf_destination`; the sources contradict it.  The 2.26
nc_transpose docstring uses the same wording as nc_matmul's ("must ... write ... to PSUM") for TensorE, yet AWS's
Stable Diffusion attention tutorial assigns a 128 x 128 (hence TensorE) nc_transpose result into an SBUF tensor
(`trans_softmax_res[...] = nisa.nc_transpose(...)`), as does the double-row matmul reference kernel: the wording
constrains the instruction, not the assignment target.  nl.store's docstring makes the same PSUM -> SBUF copy
implicit.  The rejected nc_matmul memory forms are HBM operands (isa_nc_matmul_operand_memory,
isa_matmul_memory__v2_stationary_hbm)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.tensor_engine_result_into_sbuf"
SOURCE = (
    "nki-samples@0898a77 src/nki_samples/tutorials/sd_attention/sd_attention_nki_kernels.py:192, "
    "src/nki_samples/reference/double_row_matmul.py:114; aws-neuron-sdk@49ee15c5 "
    "general/nki/api/nki/isa/__init__.py nc_matmul, nc_transpose; general/nki/api/nki/language/__init__.py store"
)
CODE = None


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32))


@nki.jit
def good(xT, y):
    out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.sbuf)
    res[...] = nisa.nc_matmul(nl.load(xT), nl.load(y))
    nl.store(out, res)
    return out


def reference(xT, y):
    return xT.T @ y
