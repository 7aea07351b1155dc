"""Two-core reduction with `nisa.sendrecv` under LNC=2: each core reduces its half of the hidden axis (sum of
squares and sum, packed into one tile), swaps the packed tile with the other core (`send_to_rank` =
`recv_from_rank` = 1 - core, `pipe_id=0`), adds what it received, and core 0 stores the full sums."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

SEEN = (
    "aws-neuron/nki-library d2ad3a5 core/subkernels/layernorm_tkg.py (shard_on_h: sum(x) and sum(x^2) packed for "
    "a single sendrecv, then local + remote) and core/subkernels/indexed_flatten.py (exchange, combine, shard 0 "
    "stores), run by the library's LNC=2 integration tests on trn2"
)
NKI = "0.7"
GRID = 2


def inputs():
    return (np.random.default_rng(29).standard_normal((16, 64)).astype(np.float32),)


@nki.jit
def kernel(x):
    P, H = x.shape
    half = H // 2
    core = nl.program_id(0)
    out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray((P, half), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x[:, core * half : (core + 1) * half])
    sq = nl.ndarray((P, half), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=sq, data1=xs, data2=xs, op=nl.multiply)
    packed = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=packed[:, 0:1], op=nl.add, data=sq, axis=1)
    nisa.tensor_reduce(dst=packed[:, 1:2], op=nl.add, data=xs, axis=1)
    remote = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=packed, dst=remote, send_to_rank=1 - core, recv_from_rank=1 - core, pipe_id=0)
    nisa.tensor_tensor(dst=packed, data1=packed, data2=remote, op=nl.add)
    if core == 0:
        nisa.dma_copy(dst=out, src=packed)
    return out


def reference(x):
    return np.stack([(x * x).sum(axis=1), x.sum(axis=1)], axis=1)
