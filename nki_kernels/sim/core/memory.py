"""On-chip memory: allocations (storage, dtype, buffer, poison state) and the live SBUF/PSUM bytes
per partition with their capacity checks (E005/E006, spec §12)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..kernel_ast import assigned_name
from . import limits
from .dtypes import _INFO
from .dtypes import info as dtype_info
from .errors import user_location
from .options import SimOptions
from .policy import enforce
from .trace import Buffer

if TYPE_CHECKING:
    from .context import RunContext
    from .dtypes import _TF32
    from .ops import Result
    from .trace import Region

BUFFERS = {b.value: b for b in Buffer}
_SBUF, _PSUM = Buffer.SBUF, Buffer.PSUM

# PSUM written-state of an element: which kind of instruction last wrote it (NKI 0.6 isa nc_matmul
# accumulate=None: "the first write to a PSUM location overwrites"; a location initialised by a
# non-matmul instruction is undefined to accumulate onto on trn2)
NEVER, BY_TENSOR_ENGINE, BY_OTHER = 0, 1, 2

# A live on-chip tile's token, a list mutated in place (Memory.track):
# [buffer name, counted bytes per partition, freed, Memory, alloc id, name, shape, origin (file, line)]
Token = list[Any]


class Alloc:
    """One allocation: storage array + NKI dtype + buffer + partition axis + written state."""

    __slots__ = (
        "id",
        "buffer",
        "array",
        "dtype",
        "_name",
        "par_axis",
        "immutable",
        "written",
        "token",
        "origin",
        "row_bytes",
        "itemsize",
        "dname",
        "unwritten",
        "phys_tiles",
        "psum_fill",
        "psum_kind",
        "argument",
        "pending",
        "poison_scans",
        "born_site",
        "born_loops",
        "__weakref__",
    )

    def __init__(
        self,
        ctx: RunContext,
        buffer: Buffer | str,
        array: np.ndarray,
        dtype: np.dtype | _TF32,
        name: str | None,
        par_axis: int | None,
        *,
        immutable: bool = False,
        origin: bool | tuple[str, int] = True,
        phys_tiles: int | None = None,
        track: bool = True,
    ):
        ctx.alloc_count += 1
        self.id = ctx.alloc_count
        self.buffer = b = buffer if buffer.__class__ is Buffer else BUFFERS[buffer]
        # storage is always held as a view (``.base`` set), so that tensor.fresh() can tell an
        # operand's memory from a new result by ``base`` alone (results never alias)
        self.array = array if array.base is not None else array.view()
        self.dtype = dtype
        self.itemsize, self.dname = _INFO.get(dtype) or dtype_info(dtype)
        self._name = name
        self.par_axis = par_axis
        self.immutable = immutable
        self.written = False
        self.unwritten = False  # poisoned and not yet fully written: reads check for poison
        self.phys_tiles = phys_tiles  # physical tiles of a mod_alloc'd block-dimension tensor
        # PSUM written state: one kind (NEVER / BY_TENSOR_ENGINE / BY_OTHER) for the whole allocation
        # while it is uniform, else an int8 array in the storage layout (psum_kind)
        self.psum_fill = NEVER
        self.psum_kind: np.ndarray | None = None
        self.argument = False  # a kernel argument (the caller's array)
        # the result this new tile holds while it waits for its destination
        self.pending: Result | None = None
        self.poison_scans = 0  # clean poison checks of reads so far (tensor._check_poison)
        # origin: True -- allocated at the user's current line; a (file, line) -- allocated there
        if origin.__class__ is not tuple:
            origin = user_location() if origin else ("<instruction result>", 0)
        self.origin = origin
        if origin:
            ctx.trace.alloc_origins[self.id] = self.origin
            if name:
                ctx.trace.alloc_names[self.id] = name
        self.token: Token | None = None
        # where the allocation was created: the user's line of the NKI call and the enclosing loops
        # (tensor scopes, E027: nki01/scopes.py)
        self.born_site = ctx.site
        self.born_loops = ctx.loops
        # bytes per partition (on chip), 0 for HBM: regions of on-chip views are per-partition
        if par_axis is not None and array.ndim and array.shape[par_axis]:
            self.row_bytes = array.nbytes // array.shape[par_axis]
        else:
            self.row_bytes = 0
        if track and (b is _SBUF or b is _PSUM):
            ctx.memory.track(self)

    @property
    def name(self) -> str:
        """The tensor's ``name=``, else the variable its allocation line assigns (``out = nl.ndarray(...)``), else
        ``t<id>`` (an instruction's result)."""
        return self._name or assigned_name(*self.origin) or f"t{self.id}"

    def __del__(self) -> None:
        # getattr: a Ctrl-C or SIGTERM (raised in whatever bytecode runs) can stop __init__ before `token` is
        # set; the half-made object is still deleted ("Exception ignored ... no attribute 'token'")
        tok = getattr(self, "token", None)
        if tok is not None and not tok[2]:
            tok[3]._free(tok)

    @property
    def bytes_per_partition(self) -> int:
        """Bytes per partition in the NKI dtype (storage may be wider in compat precision)."""
        a = self.array
        assert self.par_axis is not None, "an on-chip allocation (HBM has no partitions)"
        p = a.shape[self.par_axis] if a.ndim else 1
        return a.size // p * self.itemsize if p else 0

    def psum_kinds(self) -> np.ndarray:
        """The per-element PSUM written state (int8, storage layout), materialised."""
        k = self.psum_kind
        if k is None:
            k = self.psum_kind = np.full(self.array.shape, self.psum_fill, dtype=np.int8)
        return k


class Memory:
    """Live on-chip bytes per partition (SBUF, PSUM), released when tiles die (CPython refcount)."""

    def __init__(self, options: SimOptions, warned: set):
        self.options = options
        # Live on-chip bytes over capacity are the lenient rules pm.sbuf_spill / pm.psum_capacity (policy.py): a
        # SimWarning, the error under SimOptions.strict.  The compiler frees a tile after its last use and spills
        # SBUF ("Memory hierarchy", 2.26 programming_model.rst); the interpreter sees only Python references.
        self.warned = warned
        self.live = {"sbuf": 0, "psum": 0}
        self.peak = {"sbuf": 0, "psum": 0}
        self.tiles: dict[str, dict[int, Token]] = {"sbuf": {}, "psum": {}}  # alloc id -> token of live tiles
        # Capacity is checked at the next instruction, not at allocation: `t = nl.ndarray(...)` in a
        # loop allocates the new tile before the old one is unbound, as the compiler's allocator would
        # not (it reuses the dead tile's space).
        self.dirty = False
        # block-dimension tensors (axes before nl.par_dim): alloc id -> [token, storage bytes of one
        # block within a partition row, NKI bytes of one block, set of live block indices]
        self.blocks: dict = {}

    def track(self, alloc: Alloc) -> None:
        a = alloc.array
        par = alloc.par_axis
        assert par is not None, "only on-chip allocations are tracked"
        p = a.shape[par] if a.ndim else 1
        n = a.size // p * alloc.itemsize if p else 0  # NKI bytes per partition
        # keyed by the buffer's name (hashing an enum member is a Python-level call)
        buf = "sbuf" if alloc.buffer is _SBUF else "psum"
        # the token must not keep the Alloc alive: its name, not the Alloc
        alloc.token = tok = [buf, n, False, self, alloc.id, alloc._name, a.shape, alloc.origin]
        if par:
            # The block dimension "does not reflect the number of physical tiles" (2.26
            # nki.compiler psum.alloc / nki_block_dimension_migration_guide.rst): count the blocks
            # in use -- written and not yet read since -- not every logical block.  A block read and later
            # read again is counted optimistically.
            nblocks = 1
            for d in alloc.array.shape[: alloc.par_axis]:
                nblocks *= d
            if nblocks and alloc.phys_tiles is not None:
                # under mod_alloc the physical tiles are given: num_bank_tiles etc.
                n = tok[1] = min(nblocks, alloc.phys_tiles) * (n // nblocks)
            elif nblocks:
                self.blocks[alloc.id] = [tok, alloc.row_bytes // nblocks, n // nblocks, set()]
                n = tok[1] = 0
        live = self.live
        v = live[buf] = live[buf] + n
        self.tiles[buf][alloc.id] = tok
        if v > (limits.SBUF_BYTES_PER_PARTITION if buf == "sbuf" else limits.PSUM_BYTES_PER_PARTITION):
            # only an allocation past capacity needs the check at the next instruction (check() returns
            # at once while both buffers fit)
            self.dirty = True
        if v > self.peak[buf]:
            self.peak[buf] = v

    def renumber(self, alloc: Alloc, new_id: int) -> None:
        """Give ``alloc`` the id ``new_id`` (a loop program's body tile the kernel holds after the loop becomes the
        last iteration's: core/program.py Program.run)."""
        tok = alloc.token
        if tok is not None and not tok[2]:
            old = tok[4]
            self.tiles[tok[0]][new_id] = self.tiles[tok[0]].pop(old)
            if old in self.blocks:
                self.blocks[new_id] = self.blocks.pop(old)
            tok[4] = new_id
        alloc.id = new_id

    def _free(self, tok: Token) -> None:
        if not tok[2]:
            tok[2] = True
            self.live[tok[0]] -= tok[1]
            self.tiles[tok[0]].pop(tok[4], None)
            if self.blocks:
                self.blocks.pop(tok[4], None)

    def block_liveness(self, reads: Iterable[Region], writes: Iterable[Region]) -> None:
        """Update the live blocks of block-dimension tensors: a read retires the blocks it
        covers, a write (after the reads of the same instruction) makes them live."""
        for regions, live in ((reads, False), (writes, True)):
            for r in regions:
                b = self.blocks.get(r.alloc_id)
                if b is None or r.hi <= r.lo:
                    continue
                tok, brow, bbytes, cur = b
                idx = range(r.lo // brow, (r.hi - 1) // brow + 1)
                if live:
                    cur.update(idx)
                else:
                    cur.difference_update(idx)
                n = len(cur) * bbytes
                if n != tok[1]:
                    self.live[tok[0]] += n - tok[1]
                    if n > tok[1]:
                        self.dirty = True
                    tok[1] = n
                    if self.live[tok[0]] > self.peak[tok[0]]:
                        self.peak[tok[0]] = self.live[tok[0]]

    def initialised_blocks(self, alloc: Alloc) -> None:
        """A PSUM block-dimension tensor was filled at creation (``nl.zeros(..., buffer=nl.psum)``): its
        blocks become live when an instruction writes them, not all at once -- the compiler places the
        zero-initialised accumulators bank by bank (2.26 nki.compiler psum.alloc: the block dimension "does
        not reflect the number of physical tiles"; nki-samples blockwise_mm.py:805 holds 10 such blocks)."""
        b = self.blocks.get(alloc.id)
        if b is None:
            return
        tok, _, _, cur = b
        cur.clear()
        self.live[tok[0]] -= tok[1]
        tok[1] = 0

    def release(self, alloc: Alloc) -> None:
        """A temporary consumed by an assignment no longer occupies memory."""
        if alloc.token is not None:
            self._free(alloc.token)

    def check(self, api: str, result: Alloc | None = None) -> None:
        """E005/E006: live PSUM/SBUF bytes per partition over capacity (spec §12).

        ``result`` is the fresh result tile of the instruction being recorded: it is not counted
        yet, because `psum += nc_matmul(...)` / `dst[...] = op(...)` make it land in an existing
        tile; the next instruction checks again, by then it is either consumed
        (released) or held by the kernel (counted)."""
        live = self.live
        if live["sbuf"] <= limits.SBUF_BYTES_PER_PARTITION and live["psum"] <= limits.PSUM_BYTES_PER_PARTITION:
            self.dirty = False  # fits even counting the result
            return
        ex_buf, ex = None, 0
        if result is not None and result.token is not None and not result.token[2] and result.origin[1] == 0:
            ex_buf, ex = result.buffer, result.token[1]
        self.dirty = bool(ex)
        if not self.options.check_capacity or (
            live["sbuf"] - (ex if ex_buf == "sbuf" else 0) <= limits.SBUF_BYTES_PER_PARTITION
            and live["psum"] - (ex if ex_buf == "psum" else 0) <= limits.PSUM_BYTES_PER_PARTITION
        ):
            return
        for buf, limit, rule, fix in (
            (
                "sbuf",
                limits.SBUF_BYTES_PER_PARTITION,
                "pm.sbuf_spill",
                "Free tiles earlier (allocate them inside the loop that uses them) or use smaller tiles",
            ),
            (
                "psum",
                limits.PSUM_BYTES_PER_PARTITION,
                "pm.psum_capacity",
                "PSUM has 8 banks of 2 KiB per partition: keep at most 8 live PSUM tiles of 512 fp32",
            ),
        ):
            if self.live[buf] - (ex if ex_buf == buf else 0) > limit:
                # ex is non-zero only for a result
                tiles = [t for t in self.tiles[buf].values() if not (ex and result is not None and t[4] == result.id)]
                biggest = sorted(tiles, key=lambda t: -t[1])[:4]
                desc = ", ".join(
                    f"{t[5] or f't{t[4]}'}{tuple(t[6])} {t[1]} B from {os.path.basename(t[7][0])}:{t[7][1]}"
                    for t in biggest
                )
                # blamed at the allocation of the newest live tile: the one that did not fit
                newest = max(tiles, key=lambda t: t[4]) if tiles else None
                where = (newest[7][0], newest[7][1]) if newest is not None and newest[7][1] else user_location()
                # PSUM over capacity through block-dimension tensors: the compiler places (and evicts) their
                # logical blocks itself (2.26 psum.alloc: blocks do not "reflect the number of physical
                # tiles"; AWS's attention tutorial v3 writes 16 qk blocks before reading them)
                blocks = buf == "psum" and any(b[0][1] for b in self.blocks.values() if b[0][0] == "psum")
                why = (
                    "the compiler places the logical blocks of PSUM block-dimension tensors itself"
                    if blocks
                    else "the compiler frees a tile after its last use, the interpreter when nothing refers to it"
                    + (
                        ""
                        if buf == "psum"
                        else "; it also spills SBUF to HBM (programming_model.rst 'Memory hierarchy')"
                    )
                )
                enforce(
                    rule,
                    self.options.strict,
                    self.warned,
                    f"live {buf.upper()} bytes per partition exceed capacity (largest live tiles: {desc}); {why}",
                    fix,
                    op=api,
                    arg=buf,
                    got=self.live[buf],
                    limit=limit,
                    where=where,
                )
                return
