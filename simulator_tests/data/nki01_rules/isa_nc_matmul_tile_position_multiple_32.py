"""isa.matmul_pe_tiling: tile_position/tile_size values are multiples of 32."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "isa.matmul_pe_tiling"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_matmul (PE tiling)"
CODE = "E003"
STRICT = False


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 256)).astype(np.float32))


@nki.jit
def bad(xT, y):
    out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(nl.load(xT), nl.load(y), tile_position=(16, 0), tile_size=(64, 64))  # <- blame
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def good(xT, y):
    out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(nl.load(xT), nl.load(y), tile_position=(64, 0), tile_size=(64, 64))
    nl.store(out, nl.copy(r))
    return out


def reference(xT, y):
    return xT.T @ y
