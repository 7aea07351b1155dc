"""pm.kernel_range: a helper decorated @nki.jit(mode='trace') is traced like the kernel function, so its Python
`range` is a sequential_range with a symbolic index (AWS's workaround for NKI-917 relies on this)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.kernel_range"
SOURCE = (
    "nki-samples@0898a77 src/nki_samples/reference/rmsnorm_quant/rmsnorm_quant.py (NKI-917 note: "
    "@nki.jit(mode='trace') helpers); aws-neuron-sdk@49ee15c5 general/nki/api/nki/language/__init__.py "
    "sequential_range"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((2, 128, 64)).astype(np.float32),)


@nki.jit(mode="trace")
def _store_all(out, tiles):
    for i in range(len(tiles)):
        nl.store(out[i], tiles[i])  # <- blame


def _store_all_unrolled(out, tiles):
    for i in range(len(tiles)):
        nl.store(out[i], tiles[i])


@nki.jit
def bad(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    _store_all(out, [nl.load(a[0]), nl.load(a[1])])
    return out


@nki.jit
def good(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    _store_all_unrolled(out, [nl.load(a[0]), nl.load(a[1])])
    return out


def reference(a):
    return a
