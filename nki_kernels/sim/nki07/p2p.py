"""``nisa.sendrecv`` of NKI 0.7: tiles exchanged between the two cores of an LNC=2 launch (docs/nki-0.7-spec.md
§4c, rules X1, X2; source: aws-neuron-sdk 81ce03ae nki/api/nki/isa/__init__.py ``sendrecv``).

The cores are the two instances the interpreter already runs in lockstep (lnc.py); ``send_to_rank`` /
``recv_from_rank`` are their indices (``nl.program_id()``; the page: "must be either 0 or 1").  A send posts a copy
of ``src`` taken at the call into a queue per (sender, receiver, ``pipe_id``); the receive takes the oldest message
of its queue into ``dst``, handing the turn to the other core until it has sent.  A core waiting for a core that
has finished, or two cores waiting for each other, is E032 (a hang on hardware).  Its own module (not
collectives.py) because nki.isa imports it and collectives.py builds on nki.language, which imports nki.isa.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..core.context import enter
from ..core.enums import dma_engine, enum_arg
from ..core.errors import SimRuntimeError, SimTypeError, SimValueError
from ..core.ops import record_dma, tile
from ..core.tensor import SBUF
from .adapt import unwrap
from .lnc import Lockstep
from .scalar import value_of

_ENGINES = dma_engine
_SR = "aws-neuron-sdk 81ce03ae nki/api/nki/isa/__init__.py sendrecv"
_GPSIMD_BYTES = {4: 1024, 2: 512, 1: 256}


class _Mail:
    """The messages of one LNC launch: (sender, receiver, pipe_id) -> list of (values, shape, site)."""

    def __init__(self) -> None:
        self.q: dict[tuple, list] = {}
        self.waiting: dict[int, tuple] = {}
        self.progress = 0


_MAIL_LOCK = threading.Lock()


def _mail(ls: Lockstep) -> _Mail:
    with _MAIL_LOCK:
        m = getattr(ls, "_nki_sendrecv", None)
        if m is None:
            m = _Mail()
            ls._nki_sendrecv = m  # type: ignore[attr-defined]
        return m


def _core_rank(x: Any, arg: str, n: int, api: str) -> int:
    if isinstance(x, bool):
        raise SimTypeError("E010", api, arg, f"{arg} must be an int core index, got a bool")
    v = value_of(x, api)
    if v not in (0, 1):
        raise SimValueError(
            "E011", api, arg, f"{arg}={v}: must be 0 or 1, the cores of a logical NeuronCore ({_SR})", got=v, limit=1
        )
    if v >= n:
        raise SimValueError(
            "E011",
            api,
            arg,
            f"{arg}={v}, but this launch has {n} core(s): sendrecv exchanges between the two cores of an LNC=2 "
            f"launch ({_SR}: 'only allowed ... when LNC ... is enabled')",
            "Launch the kernel as kernel[2] (or NEURON_LOGICAL_NC_CONFIG=2)",
        )
    return v


def sendrecv(
    src: Any,
    dst: Any,
    send_to_rank: Any,
    recv_from_rank: Any,
    pipe_id: Any,
    dma_engine: Any = dma_engine.dma,
    name: str | None = None,
) -> None:
    """Send ``src`` to core ``send_to_rank`` and receive core ``recv_from_rank``'s ``src`` into ``dst`` (module
    docstring).  SBUF tiles of one dtype and shape (the page's constraints: E007 / E009 / E011);
    ``dma_engine=gpsimd_dma`` limits a partition to 1024 / 512 / 256 bytes for 32- / 16- / 8-bit types (E011)."""
    api = "nisa.sendrecv"
    ctx = enter("sendrecv")
    s = tile(unwrap(src), "sendrecv", "src", buffers=(SBUF,), engine_access=False)
    d = tile(unwrap(dst), "sendrecv", "dst", buffers=(SBUF,), engine_access=False)
    if s.dtype != d.dtype:
        raise SimTypeError(
            "E009",
            "sendrecv",
            "dst",
            f"src is {np.dtype(s.dtype).name if s.dtype.kind != 'V' else s.dtype}, dst is {d.dtype}: they must "
            f"have the same data type ({_SR})",
        )
    if tuple(s.shape) != tuple(d.shape):
        raise SimValueError(
            "E011",
            "sendrecv",
            "dst",
            f"src {tuple(s.shape)} and dst {tuple(d.shape)} must have the same shape ({_SR})",
            got=tuple(d.shape),
            limit=tuple(s.shape),
        )
    eng = enum_arg(dma_engine, _ENGINES, "sendrecv", "dma_engine")
    if eng is _ENGINES.gpsimd_dma:
        isz = np.dtype(s.dtype).itemsize
        per = (s.size // max(1, s.shape[0])) * isz
        cap = _GPSIMD_BYTES.get(isz, 256)
        if per > cap:
            raise SimValueError(
                "E011",
                "sendrecv",
                "src",
                f"dma_engine=gpsimd_dma moves at most {cap} bytes per partition of a {8 * isz}-bit type, this tile "
                f"has {per} ({_SR})",
                "Use dma_engine=nisa.dma_engine.dma, or split the tile",
                got=per,
                limit=cap,
            )
    hook = ctx.call_hook
    ls = getattr(hook, "__self__", None)
    if len(ctx.grid) > 1:
        raise SimValueError(
            "E011", "sendrecv", None, f"sendrecv exchanges between the cores of an LNC launch, not a grid {ctx.grid}"
        )
    n = ctx.grid[0] if ctx.grid else 1
    me = ctx.program_id[0] if ctx.program_id else 0
    to = _core_rank(send_to_rank, "send_to_rank", n, "sendrecv")
    frm = _core_rank(recv_from_rank, "recv_from_rank", n, "sendrecv")
    pipe = value_of(pipe_id, "sendrecv")
    mail = _mail(ls) if isinstance(ls, Lockstep) else _Mail()
    mail.q.setdefault((me, to, pipe), []).append((np.array(s.read(), copy=True), tuple(s.shape), ctx.site))
    mail.progress += 1
    key = (frm, me, pipe)
    site, api_, eng_given = ctx.site, ctx.api, ctx.engine_given
    seen = -1
    while not mail.q.get(key):
        if not isinstance(ls, Lockstep):
            raise SimRuntimeError("E032", "sendrecv", None, f"core {me} waits for core {frm}, which never sends")
        peer_done = not ls.alive[frm]
        others_waiting = all((not ls.alive[c]) or c in mail.waiting for c in range(ls.n) if c != me)
        if peer_done or (others_waiting and seen == mail.progress):
            waits = "; ".join(f"core {c} waits for core {w[0]} on pipe {w[1]}" for c, w in mail.waiting.items())
            raise SimRuntimeError(
                "E032",
                "sendrecv",
                None,
                f"core {me} waits for a message from core {frm} on pipe_id {pipe}, but "
                + ("that core has returned" if peer_done else f"no core can send it ({waits})"),
                "Both cores must call sendrecv with matching send_to_rank / recv_from_rank and pipe_id",
            )
        seen = mail.progress
        mail.waiting[me] = (frm, pipe)
        try:
            ls.step()
        finally:
            mail.waiting.pop(me, None)
    value, shape, _ = mail.q[key].pop(0)
    mail.progress += 1
    ctx.site, ctx.api, ctx.engine_given = site, api_, eng_given
    if int(np.prod(shape)) != d.size or shape[0] != d.shape[0]:
        raise SimValueError(
            "E011",
            "sendrecv",
            "dst",
            f"core {frm} sent a {shape} tile, this core's dst is {tuple(d.shape)}: the same partition count and "
            f"elements per partition are required ({_SR})",
        )
    d.write(np.asarray(value).reshape(d.shape), api=api)
    record_dma(ctx, api, d, s, d.size, op="sendrecv")
