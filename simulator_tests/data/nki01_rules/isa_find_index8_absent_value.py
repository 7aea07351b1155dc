"""isa.find_index8_absent: nisa.nc_find_index8 searching for a value absent from the data.  The 2.26 docstring
does not say what comes back; the 0.6 ISA docs define all ones.  Give all ones with a warning by default (an
error today, too strict); an error under strict."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.find_index8_absent"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_find_index8 (silent); "
    "aws-neuron-sdk@81ce03ae nki/api/nki/isa/__init__.py nc_find_index8 (absent value: all ones)"
)
CODE = "E024"
STRICT = True


def inputs():
    return (np.arange(128 * 64, dtype=np.float32).reshape(128, 64),)


@nki.jit
def bad(a):
    out = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(a)
    vals = nisa.memset((128, 8), -1.0, dtype=nl.float32)
    nl.store(out, nisa.nc_find_index8(data=t, vals=vals))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nisa.nc_find_index8(data=t, vals=nisa.max8(src=t)))
    return out


def reference(a):
    return np.tile(np.arange(63, 55, -1, dtype=np.uint32), (128, 1))
