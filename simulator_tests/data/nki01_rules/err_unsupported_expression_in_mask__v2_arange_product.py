"""err_unsupported_expression_in_mask (second form): a mask on the product of two aranges (i_p * i_f)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "err_unsupported_expression_in_mask"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-unsupported-expression-in-mask"
CODE = "E015"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(a)
    nl.store(out[i_p, i_f], t, mask=i_p * i_f < 64)  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(a)
    nl.store(out[i_p, i_f], t, mask=i_p + i_f < 64)
    return out


def reference(a):
    ip, jf = np.indices((64, 64))
    return np.where(ip + jf < 64, a, 0.0).astype(np.float32)
