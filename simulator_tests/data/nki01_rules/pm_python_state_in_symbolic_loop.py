"""pm.loop_body_traced_once: NKI 0.1 traces the body of a symbolic loop once, so a Python value updated in the
body (`count += 1`) holds its one-iteration value afterwards on hardware, while an eager run counts every
iteration.  It compiles (the 0.2 migration guide calls the result surprising/undefined): a warning by default,
an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.loop_body_traced_once"
SOURCE = (
    "aws-neuron-sdk@81ce03ae nki/migration/index.rst 'Consistent control flow behavior' (NKI 0.1 executes a "
    "loop body once); aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py affine_range"
)
CODE = "E028"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((4, 128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    count = 0
    for i in nl.affine_range(4):
        nl.store(out[i], nl.load(a[i]))
        count += 1  # <- blame
    nl.store(out[count - 1], nl.exp(nl.load(a[count - 1])))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, 0.0)
    count = 4
    for i in nl.affine_range(count):
        nl.store(out[i], nl.load(a[i]))
    nl.store(out[count - 1], nl.exp(nl.load(a[count - 1])))
    return out


def reference(a):
    r = a.copy()
    r[3] = np.exp(a[3])
    return r
