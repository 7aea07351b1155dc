"""accept: nc_matmul's tile_position may be an affine expression of a loop index (its docstring: "integer or
affine expression")."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.matmul_tile_position_index"
SOURCE = "aws-neuron-sdk@49ee15c5 general/nki/api/nki/isa/__init__.py nc_matmul (tile_position: integer or affine)"
CODE = None


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 64, 64)).astype(np.float32), rng.standard_normal((2, 64, 256)).astype(np.float32))


@nki.jit
def good(xT, y):
    out = nl.ndarray((2, 64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        r = nisa.nc_matmul(nl.load(xT[i]), nl.load(y[i]), tile_position=(i * 64, i * 64), tile_size=(64, 64))
        nl.store(out[i], nl.copy(r))
    return out


def reference(xT, y):
    return np.stack([xT[i].T @ y[i] for i in range(2)])
