"""`if cfg and cfg.index:` where `cfg.index` is an optional tensor holding zeros: the compiler resolves the `if`
while specializing the kernel, where the tensor is an object (true), so the index's width is used."""

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = "aws-neuron/nki-library core/mlp/mlp_tkg/mlp_tkg_constants.py (`if params.expert_params.expert_index:`)"
NKI = "0.7"
WARNS = ("nki07.if_tensor",)


@dataclass
class Experts(nl.NKIObject):
    index = None  # (tokens, k) int32 tensor, or None


def inputs():
    x = np.random.default_rng(41).standard_normal((4, 8)).astype(np.float32)
    return x, np.zeros((4, 2), np.int32)


@nki.jit
def kernel(x, index):
    ex = Experts(index=index)
    k = 1
    if ex and ex.index:
        k = ex.index.shape[-1]
    out = nl.ndarray((4, 8 * k), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for j in nl.static_range(k):
        nisa.dma_copy(dst=out[:, j * 8 : (j + 1) * 8], src=t)
    return out


def reference(x, index):
    return np.concatenate([x, x], axis=1)
