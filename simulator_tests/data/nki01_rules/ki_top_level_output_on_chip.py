"""ki.top_level_hbm: the inputs and outputs of a top-level kernel live in HBM; an on-chip tile returned from
a kernel is unsupported syntax on hardware.  neuronxcc's simulate_kernel returns such a tile's values, so:
a warning by default, an error under strict (README divergences)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "ki.top_level_hbm"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/nki_known_issues.rst 'Unsupported Syntax' 1"
CODE = "E007"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    t = nl.exp(nl.load(a))
    return t  # <- blame


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(a)))
    return out


def reference(a):
    return np.exp(a)
