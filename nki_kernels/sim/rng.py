"""Random numbers: ``nl.rand``, ``nl.random_seed``, ``nisa.dropout`` / ``nl.dropout``.

Sources (aws-neuron-sdk 2.26 docs at 49ee15c5): ``general/nki/api/nki/language/__init__.py``
(``rand``: uniform values in [0, 1); ``random_seed``: the same seed gives the same sequence;
``dropout``) and ``.../isa/__init__.py`` (``dropout``: prob a scalar or a (P, 1) tile, integer
data needs a float32 prob, integer data keeps its dtype).

Decisions (README divergences): the hardware generator is not documented, so the interpreter
draws from NumPy's PCG64, seeded with 0 at the start of every run (reproducible) and by
``nl.random_seed``; the sequence differs from hardware.  ``dropout`` returns its input
unchanged, as neuronxcc's simulator does (``test_nki_isa_dropout.py``: "we don't have dropout
simulation implementation"; its golden test passes probabilities above 1 and expects non-zero
output), and warns once per call site.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from . import limits as _limits
from . import ops as _ops
from .context import current as _current
from .errors import SimTypeError, SimValueError, partition_error
from .tensor import Tensor, fresh, mask_array
from .trace import DVE, POOL


def _generator(ctx) -> np.random.Generator:
    g = getattr(ctx, "random_generator", None)
    if g is None:
        g = ctx.random_generator = np.random.default_rng(0)
    return g


def rand(shape, dtype=np.float32, **kwargs):
    """A new SBUF tile of uniform random values in [0, 1)."""
    api = "rand"
    ctx = _current(api)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if not shape or any(s < 1 for s in shape):
        raise SimValueError("E011", api, "shape", f"shape must have at least one axis and positive sizes, got {shape}")
    if shape[0] > _limits.PMAX:
        raise partition_error(api, "shape", shape[0])
    d = _dt.canonical(dtype, op=api)
    if not _dt.is_float(d):
        raise SimTypeError("E009", api, "dtype", f"rand fills with values in [0, 1): a float dtype is needed, got "
                           f"{_dt.name_of(d)}", "Use nl.float32 (the default)")
    out = fresh(_generator(ctx).random(shape, dtype=np.float32), d, api=api)
    _ops.record_compute(ctx, "rand", "nl.rand", POOL, [], out, func="rand")
    return out


def random_seed(seed, *, mask=None, **kwargs):
    """Seed the generator used by ``nl.rand`` (a 32-bit scalar, 2.26)."""
    api = "random_seed"
    ctx = _current(api)
    if isinstance(seed, Tensor):
        v = seed.read().reshape(-1)
        if v.size != 1:
            raise SimValueError("E011", api, "seed", f"seed must be one value, got a tile of shape {seed.shape}")
        seed = v[0]
    if not isinstance(seed, (int, float, np.integer, np.floating)):
        raise SimTypeError("E010", api, "seed", f"seed must be a 32-bit scalar, got {type(seed).__name__}")
    if mask is False:
        return
    ctx.random_generator = np.random.default_rng(int(seed) & 0xFFFFFFFF)


def dropout(ctx, data, prob, *, mask=None, dtype=None, _api="nisa.dropout", **kwargs):
    """Validate like the hardware instruction; return ``data`` unchanged (as neuronxcc's simulator).

    The op body of ``nisa.dropout``: isa.instruction registers it and supplies ``ctx``."""
    api = "dropout"
    _ops.tile(data, api, "data")
    if isinstance(prob, Tensor):
        _ops.tile(prob, api, "prob")
        if prob.shape[0] != data.shape[0] or _ops.free_size(prob.shape) != 1:
            raise SimValueError("E011", api, "prob", f"a tile prob must be ({data.shape[0]}, 1), got {prob.shape}")
        if not _dt.is_float(prob.dtype) or (_dt.is_int(data.dtype) and prob.dtype != _dt.float32):
            raise SimTypeError("E009", api, "prob", f"prob dtype {_dt.name_of(prob.dtype)} not allowed: float32 for "
                               "integer data, any float type for float data")
    elif not isinstance(prob, (int, float, np.integer, np.floating)):
        raise SimTypeError("E010", api, "prob", f"prob must be a scalar or a (P, 1) tile, got {type(prob).__name__}")
    d = data.dtype if dtype is None else _dt.canonical(dtype, op=api)
    if _dt.is_int(data.dtype) and d != data.dtype:
        raise SimTypeError("E009", api, "dtype", "for integer data the output dtype must be the input dtype")
    ctx.warn_once("dropout", f"{_api} is not simulated: the data is returned unchanged, as in neuronxcc's "
                  "simulator (hardware zeroes elements at random)")
    out = fresh(np.array(data.read_f32() if _dt.is_float(data.dtype) else data.read(), copy=True), d, api=api,
                mask=mask_array(mask, data.shape, api))
    _ops.record_compute(ctx, "dropout", _api, DVE, [data, prob], out, func="dropout")
    return out


def nl_dropout(x, rate, *, dtype=None, mask=None, **kwargs):
    """``nl.dropout(x, rate)``: the same instruction as ``nisa.dropout``."""
    return dropout(_current("dropout"), x, rate, dtype=dtype, mask=mask, _api="nl.dropout")
