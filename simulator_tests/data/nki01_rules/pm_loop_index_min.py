"""pm.index_needs_int: a slice whose extent depends on a symbolic loop index (`p * 128 : 200` has the extent
`200 - p * 128`, not a trace-time int); the last ragged tile is written with a mask instead.  (Sizing it with
`min(128, 200 - p * 128)` gives the same slice: min() is its second operand on hardware, see
pm_predicate_truth_value__min_mask_bound.)"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "pm.index_needs_int"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/programming_model.rst 'Tile size considerations' "
    "(layout-dynamic-loop: ragged tiles use mask=); 'Representing data in NKI' (Index)"
)
CODE = "E028"
STRICT = False


def inputs():
    return (np.random.default_rng(0).standard_normal((200, 64)).astype(np.float32),)


@nki.jit
def bad(a):
    out = nl.ndarray((200, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(2):
        nl.store(out[p * 128 : 200, :], nl.load(a[p * 128 : 200, :]))  # <- blame
    return out


@nki.jit
def good(a):
    out = nl.ndarray((200, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for p in nl.affine_range(2):
        t = nl.load(a[p * 128 + i_p, i_f], mask=(p * 128 + i_p < 200))
        nl.store(out[p * 128 + i_p, i_f], t, mask=(p * 128 + i_p < 200))
    return out


def reference(a):
    return a
