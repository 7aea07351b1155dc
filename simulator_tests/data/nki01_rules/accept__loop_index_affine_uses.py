"""accept: what a symbolic loop index supports -- affine arithmetic, nl.ds, slices, arange offsets, masks and
`if` on an index predicate (a predicated block; nki-samples@0898a77 flash_fwd `if i < n_tile_q:`)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.index_affine"
SOURCE = (
    "aws-neuron-sdk@49ee15c5 general/nki/api/nki.api.shared.rst 'NKI API Masking'; "
    "nki-samples@0898a77 src/nki_samples/reference/attention.py flash_fwd (`i = i0 * n + i1`, `if i < n_tile_q:`)"
)
CODE = None


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 1024)).astype(np.float32),)


@nki.jit
def good(a):
    out = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    for i0 in nl.affine_range(2):
        for i1 in nl.affine_range(4):
            i = i0 * 4 + i1
            t = nl.load(a[:, nl.ds(i * 128, 128)])
            if i < 6:
                nl.store(out[i_p, i * 128 + i_f], nl.exp(t))
            else:
                nl.store(out[:, i * 128 : (i + 1) * 128], t, mask=(i_p < 128 - i))
                nl.store(out[i_p, i * 128 + i_f], 0.0, mask=(i_p >= 128 - i))
    return out


def reference(a):
    r = np.exp(a)
    for i in (6, 7):
        r[:, i * 128 : (i + 1) * 128] = a[:, i * 128 : (i + 1) * 128]
        r[128 - i :, i * 128 : (i + 1) * 128] = 0.0
    return r
