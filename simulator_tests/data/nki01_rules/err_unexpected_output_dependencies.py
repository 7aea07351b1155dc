"""err_unexpected_output_dependencies: every iteration of an nl.affine_range loop writes the same SBUF
elements (index the destination by the loop variable, or use nl.sequential_range)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unexpected_output_dependencies"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unexpected-output-dependencies"
CODE = "E029"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32),)


@nki.jit
def bad(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        a[:, 0:128] = nl.load(x[:, i * 128 : (i + 1) * 128])  # <- blame
    nl.store(out[:, 0:128], a[:, 0:128])
    nl.store(out[:, 128:512], nl.load(x[:, 128:512]))
    return out


@nki.jit
def good(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        a[:, i * 128 : (i + 1) * 128] = nl.load(x[:, i * 128 : (i + 1) * 128])
    nl.store(out, a)
    return out


def reference(x):
    return x
