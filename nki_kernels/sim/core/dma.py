"""DMA instructions: ``dma_copy``, ``dma_transpose``, ``dma_compute``, and the ``nl.load`` /
``nl.store`` / ``nl.load_transpose2d`` data movement (spec §7; docs/nki-0.7-spec.md I5, I6).

DMA never touches PSUM; shapes pair row-major by element count (``dma_copy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from . import dtypes as dt
from . import limits
from .context import RunContext, lenient, unproven
from .enums import dge_mode as DgeMode
from .enums import enum_arg
from .enums import oob_mode as OobMode
from .errors import NKISyntaxError, SimTypeError, SimValueError, partition_error
from .indirect import oob_mask
from .ops import (
    BINARY,
    Dst,
    DTypeArg,
    EngineArg,
    EnumArg,
    MaskArg,
    OpArg,
    Operand,
    _fit,
    assign,
    dma_result,
    dma_transfer,
    emit,
    hbm,
    mask_of,
    op,
    opcode,
    record_dma,
    tensor_arg,
    tile,
)
from .tensor import ON_CHIP, PSUM, SBUF, Tensor
from .vector import copy_result


def _oob(x, api):
    if isinstance(x, str):  # a member name
        m = getattr(OobMode, x, None)
        if m is not None:
            return m
    return enum_arg(x, OobMode, api, "oob_mode")


@op
def dma_copy(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    *,
    mask: MaskArg = None,
    dst_rmw_op: OpArg = None,
    oob_mode: EnumArg = None,
    dge_mode: EnumArg = None,
    engine: EngineArg = None,
    priority: EnumArg = None,
    name: str | None = None,
) -> None:
    """Copy src -> dst (HBM or SBUF, never PSUM); shapes pair row-major by element count.  ``dst_rmw_op``
    (2.26, only ``add``): dst = dst + src; ``oob_mode`` (2.26): out-of-bounds indirect indices raise
    (``error``) or are skipped; with ``dge_mode=hwdge`` the dtypes must match (no cast on the hardware
    DGE; NKI 0.6 MIG "dge_mode type matching")."""
    api = "dma_copy"
    dst = tensor_arg(dst, api, "dst", "Call nisa.dma_copy(dst=..., src=...)")
    src = tensor_arg(src, api, "src", "Call nisa.dma_copy(dst=..., src=...)")
    rmw = None
    if dst_rmw_op is not None:
        rmw = opcode(dst_rmw_op, api, "dst_rmw_op")
        if rmw != "add":
            raise NKISyntaxError(
                "E021",
                api,
                "dst_rmw_op",
                f"{rmw} is not supported in 'dma_copy'",
                "Only np.add / nl.add read-modify-write is supported",
            )
    dm = enum_arg(dge_mode, DgeMode, api, "dge_mode")
    oob = _oob(oob_mode, api)
    if dm is DgeMode.hwdge and dst.dtype != src.dtype:
        raise SimTypeError(
            "E009",
            api,
            "dst",
            f"with dge_mode=hwdge src and dst dtypes must match (got "
            f"{dt.name_of(src.dtype)} -> {dt.name_of(dst.dtype)})",
            "Reinterpret with .view(dtype), or use dge_mode.swdge/none to cast",
        )
    if dst.alloc.buffer in ON_CHIP:
        dst = tile(dst, api, "dst", buffers=(SBUF,), engine_access=False)
    if src.alloc.buffer in ON_CHIP:
        tile(src, api, "src", buffers=(SBUF,), engine_access=False)
    m = oob_mask(dst, src, mask_of(mask, dst._shape, api), oob, api, rmw)
    dma_transfer(ctx, dst, src, api="nisa.dma_copy", mask=m, rmw=rmw)


_DMA_T_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@op
def dma_transpose(
    ctx: RunContext,
    dst: Dst,
    src: Tensor,
    axes: tuple | None = None,
    *,
    mask: MaskArg = None,
    dtype: DTypeArg = None,
    dge_mode: EnumArg = None,
    oob_mode: EnumArg = None,
    priority: EnumArg = None,
    name: str | None = None,
    spec: str = "0.1",
) -> Tensor | None:
    """Transpose on the DMA engine; permutations (1,0), (2,1,0), (3,1,2,0) (SDK 2.26 isa).  ``spec``:
    which documented ``dge_mode`` rule applies -- "0.1": unknown or hwdge (2.27 isa dma_transpose),
    "0.6": also swdge (NKI 0.6 isa ``dma_transpose``: unknown/hwdge or unknown/swdge).  With a
    destination, ``dst.shape`` equals the permuted ``src.shape`` exactly (NKI 0.6 MIG 0.3->0.4)."""
    api = "dma_transpose"
    if not isinstance(src, Tensor) or src.alloc.buffer is PSUM:
        raise SimTypeError("E007", api, "src", "dma_transpose reads HBM or SBUF")
    if spec == "0.1":
        # ERR err_indirect_indices_are_not_supported_with_nki_api (SDK 2.26 nki.errors.rst) names nl.load_transpose2d
        # and nisa.dma_transpose.  Indirect dma_transpose arrived later: the Neuron 2.28 (NKI 0.2.0) release notes
        # say "dma_transpose now supports indirect addressing", and the 2.26 nki/test has no indirect example (the
        # later SDK's test of one, 81ce03ae nki/test/test_nki_isa_dma_transpose.py, is itself marked xfail
        # PBE-63).  The 0.6 front end keeps accepting it (NKI 0.6 isa "DMA Indirect Transpose Constraints").
        _no_dynamic(api, src)
    nd = src.ndim
    axes = tuple(axes) if axes is not None else _DMA_T_AXES.get(nd, tuple(reversed(range(nd))))
    if axes not in _DMA_T_AXES.values() or len(axes) != nd:
        raise SimValueError(
            "E020",
            api,
            "axes",
            f"unsupported permutation {axes} for a {nd}-D source",
            "Allowed: (1,0) for 2-D, (2,1,0) for 3-D, (3,1,2,0) for 4-D (SDK 2.26 isa dma_transpose)",
        )
    dm = enum_arg(dge_mode, DgeMode, api, "dge_mode")
    allowed = (DgeMode.unknown, DgeMode.hwdge) if spec == "0.1" else (DgeMode.unknown, DgeMode.hwdge, DgeMode.swdge)
    if dm is DgeMode.none and spec != "0.1":
        lenient(
            "nki07.dma_transpose_dge_none",
            "dma_transpose with dge_mode=none: the NKI 0.6 isa docstring lists only unknown/hwdge and unknown/swdge, "
            "AWS's nki-library uses none (static DMA descriptors)",
            "Leave dge_mode unset (unknown) to let the compiler choose",
            op=api,
            arg="dge_mode",
        )
    elif dm is not None and dm not in allowed:
        raise SimValueError(
            "E020",
            api,
            "dge_mode",
            f"the only valid dge_modes of dma_transpose are "
            f"{'/'.join(m.name for m in allowed)} "
            f"({'2.27 isa dma_transpose docstring' if spec == '0.1' else 'NKI 0.6 isa dma_transpose'})",
            "Leave dge_mode unset",
        )
    if dm is DgeMode.hwdge and spec == "0.1":
        # 2.27 isa dma_transpose: a hardware-DGE transpose needs src.shape[0] == 16,
        # src.shape[-1] % 128 == 0 and a 2-byte dtype
        if src.shape[0] != 16 or src.shape[-1] % 128 or src.itemsize != 2:
            raise SimValueError(
                "E020",
                api,
                "src",
                f"a hwdge dma_transpose needs src.shape[0] == 16, "
                f"src.shape[-1] % 128 == 0 and a 2-byte dtype; got {src.shape} "
                f"{dt.name_of(src.dtype)} (2.27 isa dma_transpose)",
                "Use dge_mode unset, or a (16, 128*k) bf16/fp16 source",
            )
    want = tuple(src.shape[a] for a in axes)
    if isinstance(dst, Tensor) and dst._shape != want:
        raise SimValueError(
            "E011",
            api,
            "dst",
            f"dst.shape {dst.shape} must equal the transposed src shape {want} exactly, including rank (NKI 0.4)",
            "Allocate dst with the permuted shape",
        )
    if nd == 3 and src.alloc.buffer is SBUF:
        # nki-samples keeps DMA transposes off on trn2 "until we stabilized it" (spec Corrections 12)
        unproven(
            "isa.dma_transpose_3d",
            "a 3-D SBUF->SBUF dma_transpose is hardware-unproven (nki-samples disable "
            "DMA transposes on trn2 until stabilized); transpose on TensorE (nc_transpose) instead",
        )
    v = np.ascontiguousarray(np.transpose(src.read_f32(), axes))
    d = src.dtype if dtype is None else dt.canonical(dtype, op=api)
    res = dma_result(
        v.shape,
        v,
        src,
        api="nisa.dma_transpose",
        op="dma_transpose",
        transpose=True,
        mask=mask_of(mask, v.shape, api),
        dtype=d,
    )
    return emit(ctx, dst, res)


@op
def dma_compute(
    ctx: RunContext,
    dst: Dst,
    srcs: Sequence[Tensor],
    reduce_op: OpArg,
    scales: Sequence[float] | None = None,
    unique_indices: bool = True,
    oob_mode: EnumArg = None,
    *,
    name: str | None = None,
) -> None:
    """``dst = reduce_op(srcs[0]*scales[0], srcs[1]*scales[1], ...)`` on the DMA engines, in fp32 (NKI 0.6 isa
    ``dma_compute``).  Its constraints as the SDK states them (aws-neuron-sdk@81ce03ae nki/api/nki/isa/__init__.py
    ``dma_compute``: "Currently, only ``nl.add`` is supported for ``reduce_op``, and all values in ``scales`` must
    be ``1.0``"): E021 otherwise.  One DMA event that reads every source."""
    api = "dma_compute"
    dst = tensor_arg(dst, api, "dst")
    if not srcs:
        raise SimValueError("E011", api, "srcs", "dma_compute needs at least one source")
    name_ = opcode(reduce_op, api, "reduce_op")
    if name_ != "add":
        raise NKISyntaxError(
            "E021",
            api,
            "reduce_op",
            f"{name_} is not supported in 'dma_compute': only nl.add is (NKI 0.7 isa dma_compute)",
            "Pass reduce_op=nl.add, or combine the sources with an engine instruction (nisa.tensor_tensor)",
        )
    if scales is not None and any(float(x) != 1.0 for x in scales):
        raise NKISyntaxError(
            "E021",
            api,
            "scales",
            f"scales {list(scales)} are not supported in 'dma_compute': all must be 1.0 (NKI 0.7 isa dma_compute)",
            "Leave scales=None, and scale a source with an engine instruction first (nisa.tensor_scalar)",
        )
    fn = BINARY[name_]
    acc = None
    for i, s in enumerate(srcs):
        if s.size != dst.size:
            raise SimValueError("E011", api, "srcs", f"srcs[{i}] has {s.size} elements, dst has {dst.size}")
        v = s.read_f32().reshape(dst._shape)
        if scales is not None:
            v = v * np.float32(scales[i])
        acc = v if acc is None else fn(acc, v)
    dst.write(acc, api=api)
    record_dma(ctx, "nisa.dma_compute", dst, srcs[0], dst.size, op="dma_compute", more_srcs=srcs[1:])


# ---- nl.load / nl.store ---------------------------------------------------------------------


@op
def load(
    ctx: RunContext, dst: Dst, src: Tensor, *, mask: MaskArg = None, dtype: DTypeArg = None, api: str = "nl.load"
) -> Tensor | None:
    """HBM -> SBUF tile (optionally cast); a new tile for ``dst`` None/PENDING.  On-chip tiles are at
    least 2-D: a 1-element or 1-D HBM tensor loads as (1, 1) / (N, 1) (known-issues doc "Tile on
    SBUF/PSUM must have at least 2 dimensions")."""
    hbm(src, "load", "src")
    d = src.dtype if dtype is None else dt.canonical(dtype, op="load")
    shape = tuple(src.shape) + (1,) * (2 - len(src.shape)) if len(src.shape) < 2 else src.shape
    if shape[0] > limits.PMAX:
        raise partition_error("load", "src", shape[0], "Load at most 128 rows per nl.load (tile the leading axis)")
    m = mask_of(mask, shape, "load")
    src_mask = m if (m is not None and not isinstance(m, bool) and shape == src.shape) else None
    if m is False:
        v = np.zeros(shape, np.float32)
    else:
        v = src.read(src_mask)
        if shape != src.shape:
            v = np.ascontiguousarray(v).reshape(shape)
    res = dma_result(shape, v, src, api=api, mask=None if m is None or m is True else m, dtype=d)
    res.origin = True  # the tile of nl.load is an allocation of the kernel's (its line, capacity now)
    return emit(ctx, dst, res)


@op
def store(ctx: RunContext, dst: Dst, value: Operand, *, mask: MaskArg = None, api: str = "nl.store") -> None:
    """SBUF/PSUM tile (or scalar) -> HBM, cast to dst's dtype, partition-aligned broadcast; a PSUM
    value is first copied to SBUF ([lang] nl.store)."""
    dst = hbm(dst, "store", "dst")
    m = mask_of(mask, dst._shape, "store")
    if isinstance(value, Tensor):
        tile(value, "store", "value", engine_access=False)
        how = _fit("store", value._shape, dst._shape, dst)
        if value.alloc.buffer is PSUM:
            value = cast(Tensor, emit(ctx, None, copy_result(value, api="nl.copy")))
        dma_transfer(ctx, dst, value, api=api, mask=m, how=how)
    else:
        assign(ctx, dst, value, api=api, mask=mask)


@op
def _no_dynamic(api: str, src: Tensor) -> None:
    """ERR err_indirect_indices_are_not_supported_with_nki_api (SDK 2.26 nki.errors.rst): nl.load_transpose2d
    and (in NKI 0.1) nisa.dma_transpose take no runtime (indirect) indices."""
    if isinstance(src, Tensor) and src.dynamic:
        raise NKISyntaxError(
            "E014",
            api,
            "src",
            f"{api} does not support dynamic (indirect) indices: `{src.name}` is indexed with a runtime index tile",
            "Gather with nl.load(src[idx_tile[...], i_f]) first, then transpose on chip "
            "(nl.transpose / nisa.nc_transpose)",
        )


def load_transpose2d(
    ctx: RunContext, dst: Dst, src: Tensor, *, mask: MaskArg = None, dtype: DTypeArg = None
) -> Tensor | None:
    """2-D HBM [N, M] -> SBUF [M, N] (M <= 128) via a transposing DMA."""
    api = "load_transpose2d"
    _no_dynamic(api, src)
    hbm(src, api, "src")
    if len(src.shape) != 2:
        raise SimValueError("E020", api, "src", f"expects a 2-D access, got shape {src.shape}")
    n, m_ = src.shape
    if m_ > limits.PMAX:
        raise partition_error(api, "src", m_, "The transposed tile's partition axis is src's last axis: keep it <= 128")
    d = src.dtype if dtype is None else dt.canonical(dtype, op=api)
    m = mask_of(mask, (m_, n), api)  # mask= is on the result tile
    v = (
        np.ascontiguousarray(src.read(None if m is None or m is True or m is False else m.T).T)
        if m is not False
        else np.zeros((m_, n), np.float32)
    )
    res = dma_result(
        (m_, n),
        v,
        src,
        api="nl.load_transpose2d",
        op="dma_transpose",
        mask=None if m is None or m is True else m,
        dtype=d,
    )
    res.origin = True
    return emit(ctx, dst, res)
