"""TensorE instructions: ``nc_matmul`` (incl. the FP8 double-row performance mode) and
``nc_transpose`` (TensorE or VectorE), and the ``nl.matmul`` / ``nl.transpose`` compositions
(spec §8; docs/nki-0.7-spec.md I2-I4, I7, I14)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as dt
from . import limits
from .context import RunContext, lenient, unproven
from .enums import engine as Eng
from .enums import enum_arg
from .errors import SimTypeError, SimValueError
from .memory import BY_OTHER, BY_TENSOR_ENGINE, NEVER
from .ops import (
    Dst,
    DTypeArg,
    EngineArg,
    EnumArg,
    MaskArg,
    MatmulInfo,
    Operand,
    TransposeInfo,
    _space_error,
    emit,
    free_size,
    mask_of,
    new_result,
    op,
    tile,
)
from .tensor import PSUM, SBUF, Tensor
from .trace import DVE, PE
from .vector import copy_result

_MM_DTYPES = (dt.float32, dt.float16, dt.bfloat16, dt.float8_e4m3, dt.float8_e5m2)
_FP8 = (dt.float8_e4m3, dt.float8_e5m2)
_DOUBLE_ROW = ("double_row", "double_row_gen3")


def mm_dtype(stationary: Tensor, moving: Tensor) -> str:
    """The input dtype that sets the TensorE rate (``Matmul.in_dtype``): the wider operand's, the
    stationary one's on ties."""
    a, b = stationary.alloc, moving.alloc
    return b.dname if b.itemsize > a.itemsize else a.dname


def perf_mode_name(perf_mode: Any) -> str:
    """'none' or 'double_row' (2.27 / NKI 0.6 ``matmul_perf_mode``; the SDK 2.26 example spells it
    ``"double_row_gen3"``); anything else is E003."""
    name = "none" if perf_mode is None else getattr(perf_mode, "value", perf_mode)
    if name == "none":
        return name
    if name not in _DOUBLE_ROW:
        raise SimValueError(
            "E003",
            "nc_matmul",
            "perf_mode",
            f"unknown perf_mode {perf_mode!r}",
            "Use nisa.matmul_perf_mode.none or .double_row ('double_row_gen3' on trn2)",
        )
    return "double_row"


@op
def nc_matmul(
    ctx: RunContext,
    dst: Dst,
    stationary: Tensor,
    moving: Tensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: tuple = (),
    tile_size: tuple = (),
    perf_mode: EnumArg = None,
    *,
    mask: MaskArg = None,
    api: str = "nisa.nc_matmul",
    warn_non_matmul_init: bool = False,
    spec: str = "0.1",
    name: str | None = None,
) -> Tensor | None:
    """``stationary.T @ moving`` (fp32 accumulation) into PSUM: stationary (K<=128, M<=128), moving (K, N...)
    with free size <= 512, result (M, N...).  With a destination, ``accumulate`` False overwrites, True
    accumulates, None accumulates where the destination was written before (NKI 0.6 isa nc_matmul; the
    first write to a never-written PSUM element always overwrites it); ``warn_non_matmul_init``:
    accumulating onto PSUM written by a non-matmul instruction warns (NKI 0.6 isa nc_matmul note:
    undefined on trn2).  ``spec``: the double-row tiling rule -- "0.1": a column tile size other than 128
    is rejected (2.27 nc_matmul), "0.6": any PE tiling is (NKI 0.6 trainium2 arch guide)."""
    aname = "nc_matmul"
    mode = perf_mode_name(perf_mode)
    if isinstance(dst, Tensor):
        if dst.alloc.buffer is not PSUM:
            raise SimTypeError(
                "E007",
                aname,
                "dst",
                f"'{aname}' writes psum, got a tensor in '{dst.alloc.buffer.value}'",
                "Write an SBUF/PSUM tile, then dma_copy it to HBM",
            )
        if dst.dtype != dt.float32 and not is_transpose:
            raise SimTypeError(
                "E009",
                aname,
                "dst",
                f"the nc_matmul destination must be a float32 PSUM tile on trn2, got {dt.name_of(dst.dtype)}",
                "Allocate dst with dtype=nl.float32, buffer=nl.psum",
            )
    if spec == "0.1":
        stationary = _psum_operand(ctx, stationary, aname, "stationary", api)
        moving = _psum_operand(ctx, moving, aname, "moving", api)
    tile(stationary, aname, "stationary", buffers=(SBUF,))
    tile(moving, aname, "moving", buffers=(SBUF,))
    for arg, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype not in _MM_DTYPES and t.dtype is not dt.tfloat32:
            raise SimTypeError(
                "E009",
                aname,
                arg,
                f"dtype {dt.name_of(t.dtype)} is not a TensorE input dtype",
                "Use float32, tfloat32, bfloat16, float16 or float8",
            )
    if mode == "double_row":
        res = _double_row(ctx, stationary, moving, api, tile_position, tile_size, mask, spec)
    else:
        res = _matmul(ctx, stationary, moving, api, tile_position, tile_size, mask)
    if not isinstance(dst, Tensor):
        return emit(ctx, dst, res)
    acc = accumulate
    if acc is None or acc:
        al = dst.alloc
        if al.psum_kind is None:  # one written state for the whole allocation: no per-element array
            written = al.psum_fill != NEVER and dst.size > 0
            by_other = written and al.psum_fill == BY_OTHER
        else:
            kinds = dst.written_kinds()
            written = bool((kinds != NEVER).any())
            by_other = bool((kinds == BY_OTHER).any())
        if acc is None:
            acc = written
        if acc and warn_non_matmul_init and by_other:
            ctx.warn_once(
                "mm_acc_init",
                "nc_matmul accumulates onto PSUM initialised by a non-matmul instruction "
                "(memset/tensor_copy/nl.zeros): undefined behaviour on trn2 hardware (nki.isa.nc_matmul "
                "note); start the accumulation group with accumulate=False",
            )
    return emit(ctx, dst, res, accumulate=bool(acc))


def _psum_operand(ctx, t, aname: str, arg: str, api: str):
    """A PSUM tile as a TensorE operand (NKI 0.1): the ISA reads SBUF, but the compiler makes the copy
    itself (KI "Compiler passes": one ISA call may become several instructions) and AWS's flash attention
    backward feeds nc_transpose results to nc_matmul on hardware.  Decision (docs/nki-0.1-rules.md
    ki.psum_operand, section 11 item 9): the copy is made explicit (a VectorE tensor_copy in the trace) with a
    warning; E024 under strict."""
    if not isinstance(t, Tensor) or t.alloc.buffer is not PSUM:
        return t
    tile(t, aname, arg)
    unproven(
        "ki.psum_operand",
        f"{aname}({arg}) reads a PSUM tile: TensorE reads SBUF, so the compiler inserts a "
        "PSUM -> SBUF copy (made explicit here); copy it yourself with nisa.tensor_copy to control the engine",
    )
    return emit(ctx, None, copy_result(t, api=api, engine=DVE))


def _fits(shape: tuple, target: tuple) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], target[::-1], strict=False))


def _input_space_mask(mask, P: int, F: int, shape: tuple):
    """(output mask, input read mask) of nc_transpose.  A mask built over the input's (P, F) index space
    (AWS's transpose.py and conv.py kernels in nki-samples mask with the input's aranges) masks the
    corresponding output elements, transposed; the input is read only where the mask holds."""
    m = np.asarray(mask)
    if m.ndim == 2 and P != F and not _fits(m.shape, (F, P)) and _fits(m.shape, (P, F)):
        full = np.broadcast_to(m, (P, F))
        return np.ascontiguousarray(full.T), (full if len(shape) == 2 else None)
    if m.ndim == 2 and _fits(m.shape, (F, P)) and len(shape) == 2:
        return mask, np.ascontiguousarray(np.broadcast_to(m, (F, P)).T)
    return mask, None


def gemm_t(a: np.ndarray, b: np.ndarray, out_shape: tuple) -> np.ndarray:
    """``a.T @ b`` over ``b``'s flattened free axes, shaped ``out_shape`` (M, *b.shape[1:]).

    A moving view whose free axes do not flatten without a copy (a window of an image: rows of a
    wider tile) is multiplied row by row into the output instead: each row is a strided matrix
    BLAS reads in place, which measured 2x faster than copying the window first (128x128 by a
    (128, 2, 222) window of 224-wide rows: 196 vs 396 us)."""
    K, sh, st = b.shape[0], b.shape, b.strides
    nd = b.ndim
    if nd > 2 and any(st[i] != sh[i + 1] * st[i + 1] for i in range(1, nd - 1)):
        rows = 1
        for n in sh[1:-1]:
            rows *= n
        if st[-1] == b.itemsize and sh[-1] >= 32 and rows <= 32:
            out = np.empty(out_shape, dtype=np.float32)
            at = a.T
            for idx in np.ndindex(*sh[1:-1]):
                key = (slice(None), *idx)
                np.matmul(at, b[key], out=out[key])
            return out
    r = a.T @ b.reshape(K, -1)
    return r if r.shape == out_shape else r.reshape(out_shape)


def _matmul(ctx, stationary, moving, api, tile_position, tile_size, mask):
    aname = "nc_matmul"
    K, M = stationary.shape[0], free_size(stationary.shape)
    N = free_size(moving.shape)
    if moving.shape[0] != K:
        raise SimValueError(
            "E003",
            aname,
            "moving",
            f"contraction (partition) sizes differ: stationary{list(stationary.shape)} vs moving{list(moving.shape)}",
            "Both operands must have the same K on the partition axis",
            got=moving.shape[0],
            limit=K,
        )
    if stationary.ndim != 2:
        # no source states a rank for the stationary operand (SDK 2.26 / NKI 0.6 isa nc_matmul: "[K, M]" figures
        # only); AWS's nki-library (d2ad3a5, moe_cte bwmm shard-on-intermediate) passes a (128, 1, 128) view: its
        # free axes are M, flattened
        lenient(
            "isa.matmul_stationary_rank",
            f"stationary {list(stationary.shape)} has {stationary.ndim - 1} free axes: they are taken as M = {M}",
            "Reshape or index the stationary operand to (K, M)",
            op=aname,
            arg="stationary",
        )
    if M > limits.GEMM_STATIONARY_FMAX:
        raise SimValueError(
            "E003",
            aname,
            "stationary",
            f"size of dimension 1 in 'stationary{list(stationary.shape)}' of 'nc_matmul' exceed "
            f"architecture limitation of {limits.GEMM_STATIONARY_FMAX}",
            "Tile M into blocks of nl.tile_size.gemm_stationary_fmax (128)",
            got=M,
            limit=limits.GEMM_STATIONARY_FMAX,
        )
    if N > limits.GEMM_MOVING_FMAX:
        raise SimValueError(
            "E003",
            aname,
            "moving",
            f"size of free dimensions in 'moving{list(moving.shape)}' of 'nc_matmul' exceed "
            f"architecture limitation of {limits.GEMM_MOVING_FMAX}",
            "Tile N into blocks of nl.tile_size.gemm_moving_fmax (512)",
            got=N,
            limit=limits.GEMM_MOVING_FMAX,
        )
    if tile_position or tile_size:
        # SDK 2.26 isa nc_matmul "Requirements on tile_position and tile_size"
        if not (tile_position and tile_size) or any(int(v) % 32 for v in tuple(tile_position) + tuple(tile_size)):
            raise SimValueError(
                "E003",
                aname,
                "tile_position",
                "tile_position and tile_size must both be set, in multiples of 32",
                f"got tile_position={tile_position}, tile_size={tile_size}",
            )
        rows, cols = int(tile_size[0]), int(tile_size[1])
        if (
            rows < K
            or cols < M
            or int(tile_position[0]) + rows > limits.PMAX
            or int(tile_position[1]) + cols > limits.PMAX
        ):
            raise SimValueError(
                "E003",
                aname,
                "tile_size",
                f"tile_size {tuple(tile_size)} at {tuple(tile_position)} must cover the stationary "
                f"tile ({K}, {M}) and stay inside the 128x128 PE array",
                "tile_size >= the accessed stationary size (SDK 2.26 isa nc_matmul)",
            )
    out_shape = (M,) + tuple(moving.shape[1:])
    if ctx.options.trace_only:
        r = np.zeros(out_shape, dtype=np.float32)
    else:
        r = gemm_t(stationary.read_f32().reshape(K, M), moving.read_f32(), out_shape)
    return new_result(
        MatmulInfo(K, M, N, mm_dtype(stationary, moving), "none"),
        r,
        dt.float32,
        op="nc_matmul",
        api=api,
        engine=PE,
        inputs=(stationary, moving),
        partitions=K,
        free_elems=N,
        nbytes=stationary.size * stationary.itemsize + moving.size * moving.itemsize + M * N * 4,
        flops=2 * K * M * N,
        buffer=PSUM,
        mask=mask_of(mask, out_shape, aname),
        written_by=BY_TENSOR_ENGINE,
        private=True,
    )


def _double_row(ctx, stationary, moving, api, tile_position, tile_size, mask, spec):
    """FP8 double-row mode: stationary (K, 2, M), moving (K, 2, N), both fp8 -> PSUM fp32 (M, N), the
    contraction over the partition axis and the pair axis (2.27 docstring at 337e6041 ``nc_matmul``
    "Performance mode"; NKI 0.6 isa ``nc_matmul`` "Layout"; golden value
    ``nki/test/test_nki_isa_nc_matmul.py::test_double_row_gen3`` at 81ce03ae:
    ``einsum("kli,klj->ij")``).  Recorded as the PE array sees it: K = 2 x partitions
    (``trace.Matmul``)."""
    aname = "nc_matmul"
    for arg, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype not in _FP8:
            raise SimTypeError(
                "E009",
                aname,
                arg,
                f"perf_mode='double_row' needs fp8 operands, got {dt.name_of(t.dtype)}",
                "Use nl.float8_e4m3 / nl.float8_e5m2 or perf_mode none",
            )
        if t.ndim != 3 or t.shape[1] != 2:
            raise SimValueError(
                "E003",
                aname,
                arg,
                f"perf_mode='double_row' needs a (K, 2, F) operand, got {t.shape}",
                "Pack the two element pairs on axis 1",
            )
    K, M, N = stationary.shape[0], stationary.shape[2], moving.shape[2]
    if moving.shape[0] != K:
        raise SimValueError(
            "E003",
            aname,
            "moving",
            f"contraction sizes differ: {stationary.shape} vs {moving.shape}",
            got=moving.shape[0],
            limit=K,
        )
    if M > limits.GEMM_STATIONARY_FMAX or N > limits.GEMM_MOVING_FMAX:
        raise SimValueError(
            "E003",
            aname,
            "moving" if N > limits.GEMM_MOVING_FMAX else "stationary",
            f"free sizes M={M}, N={N} exceed {limits.GEMM_STATIONARY_FMAX} / {limits.GEMM_MOVING_FMAX}",
        )
    if (tile_size and int(tuple(tile_size)[1]) != 128) or (spec == "0.6" and (tile_position or tile_size)):
        # "cannot be combined with column tiling" (2.27 nc_matmul); NKI 0.6: nor with PE tiling
        raise SimValueError(
            "E003",
            aname,
            "tile_size",
            "double-row mode cannot be combined with column tiling (2.27 nc_matmul; NKI 0.6 trainium2 arch guide)",
            f"got tile_size={tile_size}",
        )
    if ctx.options.trace_only:
        r = np.zeros((M, N), np.float32)
    else:
        r = np.ascontiguousarray(
            np.einsum("kli,klj->ij", stationary.read_f32(), moving.read_f32(), dtype=np.float32), dtype=np.float32
        )
    return new_result(
        MatmulInfo(2 * K, M, N, mm_dtype(stationary, moving), "double_row"),
        r,
        dt.float32,
        op="nc_matmul",
        api=api,
        engine=PE,
        inputs=(stationary, moving),
        partitions=K,
        free_elems=N,
        nbytes=stationary.size * stationary.itemsize + moving.size * moving.itemsize + M * N * 4,
        flops=2 * (2 * K) * M * N,
        buffer=PSUM,
        mask=mask_of(mask, (M, N), aname),
        written_by=BY_TENSOR_ENGINE,
        private=True,
    )


@op
def nc_transpose(
    ctx: RunContext,
    dst: Dst,
    data: Tensor,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    engine: EngineArg = None,
    api: str = "nisa.nc_transpose",
    name: str | None = None,
    spec: str = "0.1",
) -> Tensor | None:
    """Swap partition and (flattened) free axes: TensorE (<= 128x128, SBUF -> PSUM) or VectorE
    (<= 32x32, SBUF/PSUM -> SBUF).  ``engine`` unset: TensorE for an SBUF source without a destination
    (SDK 2.26), with a destination TensorE when it is PSUM and the source SBUF, else VectorE (NKI 0.6
    RN 0.3 "auto-select based on the destination buffer").  With a destination its dtype equals the
    source's (NKI 0.6 isa nc_transpose)."""
    aname = "nc_transpose"
    tile(data, aname, "data")
    if isinstance(dst, Tensor) and dst.dtype != data.dtype:
        raise SimTypeError(
            "E009",
            aname,
            "dst",
            f"dst dtype {dt.name_of(dst.dtype)} must equal data dtype {dt.name_of(data.dtype)}",
            "Allocate dst with data.dtype",
        )
    P, F = data.shape[0], free_size(data.shape)
    e = enum_arg(engine, Eng, aname, "engine")
    if e in (None, Eng.unknown):
        if isinstance(dst, Tensor):
            e = Eng.tensor if (dst.alloc.buffer is PSUM and data.alloc.buffer is SBUF) else Eng.vector
        else:
            e = Eng.tensor if data.alloc.buffer is SBUF else Eng.vector
        if spec == "0.1" and e != Eng.tensor and max(P, F) > limits.VECTOR_TRANSPOSE_MAX:
            # wider than VectorE's 32x32: the compiler picks TensorE (its PSUM result copied to an SBUF
            # destination), as it does for an SBUF source without a destination
            e = Eng.tensor
    if e == Eng.tensor:
        if data.alloc.buffer is PSUM and spec == "0.1":
            data = _psum_operand(ctx, data, aname, "data", api)
        if data.alloc.buffer is not SBUF:
            raise _space_error(aname, "data", data, (SBUF,))
        lim, kind, buf, te = limits.PMAX, "tensor", PSUM, PE
    else:
        lim, kind, buf, te = limits.VECTOR_TRANSPOSE_MAX, "vector", SBUF, DVE
    for d_, n in ((0, P), (1, F)):
        if n > lim:
            raise SimValueError(
                "E020",
                aname,
                "data",
                f"size of dimension {d_} in 'data{list(data.shape)}' of 'nc_transpose' exceed "
                f"architecture limitation of {lim} ({kind} engine)",
                "Transpose blocks of at most 128x128 on TensorE (32x32 on VectorE)",
                got=n,
                limit=lim,
            )
    in_mask = None
    if mask is not None and not isinstance(mask, bool):
        mask, in_mask = _input_space_mask(mask, P, F, data.shape)
    r = (
        np.ascontiguousarray(data.read_f32(in_mask).reshape(P, F).T)
        if not ctx.options.trace_only
        else np.zeros((F, P), np.float32)
    )
    d = data.dtype if dtype is None else dt.canonical(dtype, op=aname)
    res = new_result(
        TransposeInfo(P, F, data.alloc.dname, kind == "tensor", data.alloc.buffer is PSUM),
        r,
        d,
        op="nc_transpose",
        api=api,
        engine=te,
        inputs=(data,),
        partitions=P,
        free_elems=F,
        nbytes=2 * data.size * data.itemsize,
        flops=2 * P * P * F if kind == "tensor" else 0,
        buffer=buf,
        mask=mask_of(mask, (F, P), aname),
        written_by=BY_TENSOR_ENGINE if kind == "tensor" else BY_OTHER,
    )
    return emit(ctx, dst, res)


# ---- nl.matmul / nl.transpose ---------------------------------------------------------------------


@op
def matmul(
    ctx: RunContext,
    dst: Dst,
    x: Tensor,
    y: Operand,
    transpose_x: bool = False,
    *,
    mask: MaskArg = None,
    api: str = "nl.matmul",
) -> Tensor | None:
    """``nl.matmul``: ``x @ y`` (``x.T @ y`` with ``transpose_x``) into PSUM fp32 -- a TensorE transpose
    of ``x`` and its copy to SBUF when not ``transpose_x``, then ``nc_matmul``; PSUM operands are
    first copied to SBUF (spec §8)."""
    if isinstance(x, Tensor) and x.alloc.buffer is PSUM:
        x = emit(ctx, None, copy_result(x, api="nl.copy"))
    if isinstance(y, Tensor) and y.alloc.buffer is PSUM:
        y = emit(ctx, None, copy_result(y, api="nl.copy"))
    if not transpose_x:
        tile(x, "matmul", "x")
        xt = nc_transpose(ctx, None, x, engine=Eng.tensor, api=api)
        x = emit(ctx, None, copy_result(xt, api=api, engine=DVE))
    return nc_matmul(ctx, dst, x, y, mask=mask, api=api)


@op
def transpose(
    ctx: RunContext, dst: Dst, x: Tensor, *, dtype: DTypeArg = None, mask: MaskArg = None, api: str = "nl.transpose"
) -> Tensor | None:
    """``nl.transpose``: a 2-D tile transpose on TensorE (both dims <= 128); result in PSUM (spec §8)."""
    tile(x, "transpose", "x")
    if x.ndim != 2:
        raise SimValueError(
            "E020",
            "transpose",
            "x",
            f"parameter 'x{list(x.shape)}' of 'transpose' exceed max supported number of dimensions of 2.",
            "Reshape to 2-D first",
        )
    return nc_transpose(ctx, dst, x, dtype=dtype, mask=mask, engine=Eng.tensor, api=api)
