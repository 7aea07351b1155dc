"""accept: an nl.shared_hbm output created under an `if` on a Python value (a trace-time constant, not a
runtime predicate) and used after it -- AWS's flash attention does exactly this for its training output `lse`
(nki-samples@0898a77 src/nki_samples/reference/attention.py flash_fwd, `if config.training:`), and the
same file's test (test/unit/test_flash_attn_fwd.py) runs it with training on."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

RULE = "accept.shared_hbm_under_python_if"
SOURCE = "nki-samples@0898a77 src/nki_samples/reference/attention.py flash_fwd (`lse` under `if config.training:`)"
CODE = None


def inputs():
    return (np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def good(a, training=True):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if training:
        stats = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    else:
        stats = None
    t = nl.load(a)
    nl.store(out, t)
    if training:
        nl.store(stats, nl.max(t, axis=[1], keepdims=True))
        return out, stats
    return out


def reference(a):
    return a, a.max(axis=1, keepdims=True)
