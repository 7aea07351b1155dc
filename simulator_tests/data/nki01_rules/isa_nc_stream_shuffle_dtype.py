"""isa.stream_shuffle_dtype: nc_stream_shuffle's dst has src's dtype."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.stream_shuffle_dtype"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_stream_shuffle"
CODE = "E009"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((32, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    src = nl.load(a)
    dst = nl.ndarray((32, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(src=src, dst=dst, shuffle_mask=[31 - i for i in range(32)])  # <- blame
    nl.store(out, dst)
    return out


@nki.jit
def good(a):
    out = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    src = nl.load(a)
    dst = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(src=src, dst=dst, shuffle_mask=[31 - i for i in range(32)])
    nl.store(out, dst)
    return out


def reference(a):
    return a[::-1]
