"""A `@dataclass` NKIObject whose fields are plain class attributes (no annotations), built with keywords inside the
kernel, beside an annotated one built positionally: the 0.7 compiler writes `__init__` over both kinds of field
(nki-language-guide "Class Support"); Python's own dataclass would accept no arguments for the first."""

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "aws-neuron/nki-library core/attention/attention_cte.py SectionParams (a per-section record of offsets)"
NKI = "0.7"


@dataclass
class Band(nl.NKIObject):
    start = None  # first row of the band
    rows = None  # rows in it
    scale = 1.0


@dataclass
class Plan(nl.NKIObject):
    width: int
    bands: int = 2


def inputs():
    return (np.random.default_rng(23).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def kernel(x):
    plan = Plan(x.shape[1])
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for b in nl.static_range(plan.bands):
        band = Band(start=b * 64, rows=64, scale=float(b + 1))
        t = nl.ndarray((band.rows, plan.width), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[band.start : band.start + band.rows, :])
        r = nl.ndarray((band.rows, plan.width), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=band.scale)
        nisa.dma_copy(dst=out[band.start : band.start + band.rows, :], src=r)
    return out


def reference(x):
    return np.concatenate([x[:64], 2 * x[64:]])
