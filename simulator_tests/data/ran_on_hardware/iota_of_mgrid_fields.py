"""`nisa.iota(3 * g.y + g.z)` of `g = nl.mgrid[0:P, 0:W, 0:3, 0:3]`, annotated as a (P, W, 3, 3) tensor: the iota
spans the whole grid."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np

SEEN = "aws-neuron/nki-samples src/nki_samples/reference/vision.py select_and_scatter (window positions by iota)"
NKI = "0.1"


def inputs():
    return (np.zeros((1, 1), np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray((64, 5, 3, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nl.mgrid[0:64, 0:5, 0:3, 0:3]
    pos: nt.tensor[64, 5, 3, 3] = nisa.iota(3 * g.y + g.z, dtype=nl.int32)
    nl.store(out, nl.add(pos, 1.0, dtype=nl.float32))
    return out


def reference(x):
    return np.broadcast_to(np.arange(9, dtype=np.float32).reshape(3, 3) + 1.0, (64, 5, 3, 3))
