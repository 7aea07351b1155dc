"""accept: nisa.tensor_copy_dynamic_src, the errors page's own fix for an on-chip copy through a runtime index
(the `src` is indexed by a tile of offsets within each partition)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.tensor_copy_dynamic_src"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.errors.rst#err-copy-dynamic-indirect-indices-not-natively-"
    "supported; general/nki/api/nki/isa/__init__.py tensor_copy_dynamic_src"
)
CODE = None


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((128, 64)).astype(np.float32), np.array([[5]], np.int32))


@nki.jit
def good(data, off):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(data)
    o = nl.load(off)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(8)[None, :]
    nl.store(out, nisa.tensor_copy_dynamic_src(d[i_p, o[0, 0] + i_f]))
    return out


def reference(data, off):
    return data[:, 5:13]
