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
from .context import RunContext
from .errors import SimTypeError, SimValueError, partition_error
from .ops import Dst, DTypeArg, MaskArg, Operand, ShapeArg, compute_result, emit, op
from .ops import mask_of as mask_array
from .tensor import ON_CHIP, SBUF, Tensor
from .trace import DVE, POOL, Buffer


@op
def rand(
    ctx: RunContext,
    dst: Dst,
    shape: ShapeArg,
    dtype: DTypeArg = np.float32,
    *,
    buffer: Buffer = SBUF,
    api: str = "nl.rand",
) -> Tensor | None:
    """A tile of uniform random values in [0, 1) (``RunContext.rand_rng``)."""
    aname = "rand"
    if shape is None:
        raise SimValueError("E011", aname, "shape", "nl.rand needs the shape of its tile", "Pass shape=(P, F)")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if not shape or any(s < 1 for s in shape):
        raise SimValueError(
            "E011", aname, "shape", f"shape must have at least one axis and positive sizes, got {shape}"
        )
    if shape[0] > _limits.PMAX:
        raise partition_error(aname, "shape", shape[0])
    if buffer not in ON_CHIP:
        raise SimTypeError("E007", aname, "buffer", "nl.rand creates an SBUF or PSUM tile", "Use nl.sbuf")
    d = _dt.canonical(dtype, op=aname)
    if not _dt.is_float(d):
        raise SimTypeError(
            "E009",
            aname,
            "dtype",
            f"rand fills with values in [0, 1): a float dtype is needed, got {_dt.name_of(d)}",
            "Use nl.float32 (the default)",
        )
    res = compute_result(
        ctx.rand_rng.random(shape, dtype=np.float32), d, op="rand", api=api, engine=POOL, func="rand", buffer=buffer
    )
    return emit(ctx, dst, res)


@op
def random_seed(ctx: RunContext, dst: Dst, seed: Operand, *, mask: MaskArg = None) -> None:
    """Seed the generator of ``nl.rand`` (a 32-bit scalar or a one-element tile)."""
    aname = "random_seed"
    if isinstance(seed, Tensor):
        v = np.asarray(seed.read()).reshape(-1)
        if v.size != 1:
            raise SimValueError("E011", aname, "seed", f"seed must be one value, got a tile of shape {seed.shape}")
        seed = v[0]
    if not isinstance(seed, (int, float, np.integer, np.floating)):
        raise SimTypeError("E010", aname, "seed", f"seed must be a 32-bit scalar, got {type(seed).__name__}")
    if mask is False:
        return
    ctx.rand_rng = np.random.default_rng(int(seed) & 0xFFFFFFFF)


@op
def dropout(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    prob: Operand,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    api: str = "nisa.dropout",
) -> Tensor | None:
    """Validate like the hardware instruction; return ``data`` unchanged (as neuronxcc's simulator)."""
    aname = "dropout"
    _ops.tile(data, aname, "data")
    if isinstance(prob, Tensor):
        _ops.tile(prob, aname, "prob")
        if prob.shape[0] != data.shape[0] or _ops.free_size(prob.shape) != 1:
            raise SimValueError("E011", aname, "prob", f"a tile prob must be ({data.shape[0]}, 1), got {prob.shape}")
        if not _dt.is_float(prob.dtype) or (_dt.is_int(data.dtype) and prob.dtype != _dt.float32):
            raise SimTypeError(
                "E009",
                aname,
                "prob",
                f"prob dtype {_dt.name_of(prob.dtype)} not allowed: float32 for "
                "integer data, any float type for float data",
            )
    elif not isinstance(prob, (int, float, np.integer, np.floating)):
        raise SimTypeError("E010", aname, "prob", f"prob must be a scalar or a (P, 1) tile, got {type(prob).__name__}")
    d = data.dtype if dtype is None else _dt.canonical(dtype, op=aname)
    if _dt.is_int(data.dtype) and d != data.dtype:
        raise SimTypeError("E009", aname, "dtype", "for integer data the output dtype must be the input dtype")
    ctx.warn_once(
        "dropout",
        f"{api} is not simulated: the data is returned unchanged, as in neuronxcc's "
        "simulator (hardware zeroes elements at random)",
    )
    res = compute_result(
        np.array(data.read_f32() if _dt.is_float(data.dtype) else data.read(), copy=True),
        d,
        op="dropout",
        api=api,
        engine=DVE,
        inputs=(data, prob),
        mask=mask_array(mask, data.shape, aname),
        func="dropout",
    )
    return emit(ctx, dst, res)
