"""pm.sbuf_spill: live SBUF tiles over the per-partition capacity.  The compiler spills to HBM rather than failing
(programming model, "Memory hierarchy"), and AWS's select_and_scatter kernel holds about 200 KB per partition
on hardware: a warning by default; an error under strict, which the project's own kernels use (spec
Corrections 6)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.sbuf_spill"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Memory hierarchy' (spills); nki-samples@0898a77 "
    "src/nki_samples/reference/vision.py select_and_scatter (test/unit/test_select_and_scatter.py)"
)
CODE = "E006"
STRICT = True


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 4, 16384)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.shared_hbm)
    t0 = nl.load(a[:, 0, :])
    t1 = nl.load(a[:, 1, :])
    t2 = nl.load(a[:, 2, :])
    t3 = nl.load(a[:, 3, :])  # <- blame
    nl.store(out, nl.add(nl.add(t0, t1), nl.add(t2, t3)))
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.load(a[:, 0, :])
    for k in nl.sequential_range(1, 4):
        acc[...] = nl.add(acc, nl.load(a[:, k, :]))
    nl.store(out, acc)
    return out


def reference(a):
    return a.sum(axis=1)
