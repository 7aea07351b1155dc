"""The one adapter between the NKI 0.7 front end and the interpreter's op core.

Every other module of ``nki_kernels.sim.nki07`` reaches the NKI 0.1 machinery (tensors,
allocations, run context, instruction implementations, trace) only through the names defined
here, so a change in the op core breaks this file and nothing else.

The 0.1 op core's instructions *return* a fresh result tile; an assignment lands that result in
its destination directly (one instruction, rounded once to the destination dtype).  The 0.7
calling convention (``dst`` first, returns nothing) is therefore "run the core op, then land
its result in ``dst``" -- :func:`land` -- and accumulation into PSUM is :func:`land_accumulate`.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt  # noqa: F401  (re-exported)
from .. import limits as hw  # noqa: F401  (trn2 limits: PMAX, PSUM and SBUF sizes)
from .. import isa as core_isa  # noqa: F401  (the 0.1 instruction implementations)
from .. import language as core_nl  # noqa: F401
from .. import ops as core_ops
from ..context import activate, current, maybe_current  # noqa: F401
from ..memory import Alloc  # noqa: F401
from ..errors import (NKISyntaxError, SimError, SimIndexError, SimNotImplementedError,  # noqa: F401
                      SimRuntimeError, SimTypeError, SimValueError, SimWarning, _SIM_DIR,
                      needs_device, not_implemented, partition_error, user_location)
from ..options import SimOptions, default_options  # noqa: F401
from ..runner import Kernel as CoreKernel, trace_kernel, simulate_kernel  # noqa: F401
from ..tensor import HBM_KINDS, ON_CHIP, Tensor, allocate, fresh  # noqa: F401
from ..trace import ACT, DMA, DVE, PE, POOL  # noqa: F401

# ---- instruction helpers of the core ------------------------------------------------------
opcode = core_ops.opcode
check_tile = core_ops.tile
check_hbm = core_ops.hbm
dma_transfer = core_ops.dma_transfer
record_compute = core_ops.record_compute
record_dma = core_ops._record_dma
UNARY, BINARY, BITWISE, REDUCE = core_ops.UNARY, core_ops.BINARY, core_ops.BITWISE, core_ops.REDUCE


def base_ptr(t: Tensor) -> int:
    return t.alloc.array.__array_interface__["data"][0]


def view_of(t: Tensor, arr: np.ndarray) -> Tensor:
    """A core tensor for the NumPy view ``arr`` of ``t``'s storage (same allocation)."""
    off = arr.__array_interface__["data"][0] - base_ptr(t) if arr.size else t.off
    return Tensor(t.alloc, arr=arr, par=0 if t.alloc.buffer in ON_CHIP else None, off=off)


def reinterpret(t: Tensor, arr: np.ndarray, dtype) -> Tensor:
    """``arr`` (a NumPy ``.view`` of ``t.arr``) as a tensor of another NKI dtype, sharing storage.

    The new allocation is not counted again against SBUF/PSUM capacity."""
    ctx = current("view")
    al = Alloc(ctx, t.alloc.buffer, arr, dtype, t.alloc._name, 0 if t.alloc.buffer in ON_CHIP else None)
    ctx.memory.release(al)
    al.written = t.alloc.written
    return Tensor(al, arr=arr, par=al.par_axis)


def _reshaped(value: Tensor, shape) -> Tensor:
    """A fresh result tile seen with another shape of equal size (its event and exact value kept)."""
    r = Tensor(value.alloc, arr=value.arr.reshape(shape), par=0, off=value.off)
    if value._exact is not None:
        r._exact = np.reshape(value._exact, shape)
        r._exact_ver = value._exact_ver
    r._event = value._event
    return r


def fit_result(api: str, dst: Tensor, value: Tensor) -> Tensor:
    """ISA rule I8: ``dst`` has the result's partition count and element count per partition."""
    if value.shape == dst.shape:
        return value
    P, F = value.shape[0], core_ops.free_size(value.shape)
    if dst.shape[0] != P or core_ops.free_size(dst.shape) != F:
        raise SimValueError("E011", api, "dst",
                            f"dst{list(dst.shape)} does not match the result{list(value.shape)}: it needs "
                            f"{P} partitions and {F} elements per partition",
                            "Slice or reshape dst to the instruction's output shape")
    return _reshaped(value, dst.shape)


def land(api: str, dst: Tensor, value: Tensor) -> None:
    """Write an instruction's fresh result into ``dst`` (the instruction writes dst directly)."""
    v = fit_result(api, dst, value)
    ev = v._event
    dal = dst.alloc
    if ev is not None and dst.arr is not None and dal.buffer in ON_CHIP and v.alloc.buffer in ON_CHIP \
            and (ev.engine != PE or dal.buffer == "psum") and (ev.engine != DMA or dal.buffer != "psum") \
            and v.is_fresh() and not dal.immutable:
        # the hot path of core_ops.assign for a fresh result (same steps, without re-checking)
        dst.write(v._exact, api=api)
        ev.writes = [dst.region()]
        ev.out_dtype = dal.dname
        ev.meta["psum_out"] = dal.buffer == "psum"
        current(api).memory.release(v.alloc)
        return
    if ev is not None and ev.engine == DMA and dal.buffer in HBM_KINDS and v.is_fresh():
        # a DMA (e.g. dma_transpose) whose destination is HBM: still one instruction
        dst.write(v._exact, api=api)
        ev.writes = [dst.region()]
        ev.out_dtype = dt.name_of(dst.dtype)
        current(api).memory.release(v.alloc)
        return
    core_ops.assign(dst, v, api=api)


def land_accumulate(api: str, dst: Tensor, value: Tensor) -> None:
    """``dst += value`` for a fresh nc_matmul result (PSUM accumulation, one instruction)."""
    core_ops.accumulate(dst, fit_result(api, dst, value), "add")


def assign(dst: Tensor, value, api: str) -> None:
    """``dst[...] = value`` with the core's rules (copy, memset or DMA; results land directly)."""
    core_ops.assign(dst, value, api=api)


def same_partitions(api, **tiles):
    core_ops.same_partitions(api, **tiles)


def free_size(shape) -> int:
    return core_ops.free_size(shape)


class Unimplemented:
    """Stands for a documented NKI name the interpreter does not implement: importing it works
    (``from nki.isa import sendrecv`` at module level), using it raises E100."""

    def __init__(self, api: str):
        self._api = api

    def __call__(self, *args, **kwargs):
        raise not_implemented(self._api)

    def __getattr__(self, name):
        if name.startswith("_"):     # introspection (pytest, inspect, copy) must see a plain object
            raise AttributeError(name)
        return Unimplemented(f"{self._api}.{name}")

    def __getitem__(self, item):
        raise not_implemented(self._api)

    def __repr__(self):
        return f"<not implemented in nki_kernels.sim: {self._api}>"


def module_getattr(prefix: str):
    """A module ``__getattr__`` for an NKI 0.7 namespace: unknown public names are Unimplemented."""
    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(name)
        return Unimplemented(f"{prefix}.{name}")
    return __getattr__


def capacity_as_warning(ctx) -> None:
    """NKI 0.7 (the NKI >= 0.2 compiler) frees an SBUF/PSUM tensor after its last use; the interpreter
    only sees Python references, which 0.7 code (lists and allocator objects of tiles) keeps long
    after the last use.  So for 0.7 kernels a live-bytes overflow (E005/E006) is one SimWarning per
    run, and an error only under ``SimOptions(strict=True)``."""
    mem = ctx.memory
    if getattr(mem, "_nki07_soft", False) or ctx.options.strict:
        return
    check = mem.check

    def soft_check(*args, **kwargs):
        try:
            check(*args, **kwargs)
        except SimValueError as e:
            if e.code not in ("E005", "E006"):
                raise
            if not getattr(mem, "_nki07_warned", False):
                mem._nki07_warned = True
                ctx.warn_once("capacity07", f"{e} -- NKI 0.7 frees tiles after their last use, which the "
                              "interpreter cannot see: a warning here, an error with SimOptions(strict=True)")
    mem.check = soft_check
    mem._nki07_soft = True


def new_kernel(func, grid=(), **options) -> CoreKernel:
    return CoreKernel(func, grid=grid, **options)
