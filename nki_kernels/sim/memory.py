"""On-chip memory: allocations (storage, dtype, buffer, poison state) and the live SBUF/PSUM bytes
per partition with their capacity checks (E005/E006, spec §12; issue 8 items 5 and 17)."""
from __future__ import annotations

import os

from . import limits
from .dtypes import info as dtype_info
from .errors import SimValueError, user_location
from .options import SimOptions


class Alloc:
    """One allocation: storage array + NKI dtype + buffer + partition axis."""
    __slots__ = ("id", "buffer", "array", "dtype", "_name", "par_axis", "immutable", "written",
                 "version", "token", "origin", "zeroed", "row_bytes", "itemsize", "dname", "unwritten", "phys_tiles",
                 "__weakref__")

    def __init__(self, ctx, buffer, array, dtype, name, par_axis, *, immutable=False, zeroed=False, origin=True,
                 phys_tiles=None):
        ctx._alloc_id += 1
        self.id = ctx._alloc_id
        self.buffer = buffer
        # storage is always held as a view (``.base`` set), so that tensor.fresh() can tell an
        # operand's memory from a new result by ``base`` alone (results never alias, issue 8 item 14)
        self.array = array if array.base is not None else array.view()
        self.dtype = dtype
        self.itemsize, self.dname = dtype_info(dtype)
        self._name = name
        self.par_axis = par_axis
        self.immutable = immutable
        self.written = False
        self.unwritten = False    # poisoned and not yet fully written: reads check for poison
        self.phys_tiles = phys_tiles   # physical tiles of a mod_alloc'd block-dimension tensor
        self.version = 0
        self.zeroed = zeroed
        self.origin = user_location() if origin else ("<instruction result>", 0)
        if origin:
            ctx.trace.alloc_origins[self.id] = self.origin
            if name:
                ctx.trace.alloc_names[self.id] = name
        self.token = None
        # bytes per partition (on chip), 0 for HBM: regions of on-chip views are per-partition
        self.row_bytes = array.nbytes // array.shape[par_axis] if par_axis is not None and array.ndim \
            and array.shape[par_axis] else 0
        if buffer in ("sbuf", "psum"):
            ctx.memory.track(self)

    @property
    def name(self) -> str:
        return self._name or f"t{self.id}"

    def __del__(self):
        tok = self.token
        if tok is not None and not tok[2]:
            tok[3]._free(tok)

    @property
    def bytes_per_partition(self) -> int:
        """Bytes per partition in the NKI dtype (storage may be wider in compat precision)."""
        a = self.array
        p = a.shape[self.par_axis] if a.ndim else 1
        return a.size // p * self.itemsize if p else 0


class Memory:
    """Live on-chip bytes per partition (SBUF, PSUM), released when tiles die (CPython refcount)."""

    def __init__(self, options: SimOptions):
        self.options = options
        self.live = {"sbuf": 0, "psum": 0}
        self.peak = {"sbuf": 0, "psum": 0}
        self.tiles = {"sbuf": {}, "psum": {}}   # alloc id -> (token, name, shape, origin) of live tiles
        # Capacity is checked at the next instruction, not at allocation: `t = nl.ndarray(...)` in a
        # loop allocates the new tile before the old one is unbound, as the compiler's allocator would
        # not (it reuses the dead tile's space).
        self.dirty = False
        # block-dimension tensors (axes before nl.par_dim): alloc id -> [token, storage bytes of one
        # block within a partition row, NKI bytes of one block, set of live block indices]
        self.blocks: dict = {}

    def track(self, alloc: Alloc) -> None:
        n = alloc.bytes_per_partition
        tok = [alloc.buffer, n, False, self, alloc.id, alloc, alloc.array.shape, alloc.origin]
        tok[5] = alloc._name   # not the Alloc itself: the token must not keep it alive
        alloc.token = tok
        if alloc.par_axis:
            # The block dimension "does not reflect the number of physical tiles" (2.26
            # nki.compiler psum.alloc / nki_block_dimension_migration_guide.rst): count the blocks
            # in use -- written and not yet read since -- not every logical block (issue 8 items
            # 5 and 17).  A block read and later read again is counted optimistically.
            nblocks = 1
            for d in alloc.array.shape[:alloc.par_axis]:
                nblocks *= d
            if nblocks and alloc.phys_tiles is not None:
                # under mod_alloc the physical tiles are given: num_bank_tiles etc. (issue 8 item 5)
                n = tok[1] = min(nblocks, alloc.phys_tiles) * (n // nblocks)
            elif nblocks:
                self.blocks[alloc.id] = [tok, alloc.row_bytes // nblocks, n // nblocks, set()]
                n = tok[1] = 0
        self.live[alloc.buffer] += n
        self.tiles[alloc.buffer][alloc.id] = tok
        self.dirty = True
        if self.live[alloc.buffer] > self.peak[alloc.buffer]:
            self.peak[alloc.buffer] = self.live[alloc.buffer]

    def _free(self, tok) -> None:
        if not tok[2]:
            tok[2] = True
            self.live[tok[0]] -= tok[1]
            self.tiles[tok[0]].pop(tok[4], None)
            if self.blocks:
                self.blocks.pop(tok[4], None)

    def block_liveness(self, reads, writes) -> None:
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

    def release(self, alloc: Alloc) -> None:
        """A temporary consumed by an assignment no longer occupies memory."""
        if alloc.token is not None:
            self._free(alloc.token)

    def check(self, api: str, result: "Alloc | None" = None) -> None:
        """E005/E006: live PSUM/SBUF bytes per partition over capacity (spec §12).

        ``result`` is the fresh result tile of the instruction being recorded: it is not counted
        yet, because `psum += nc_matmul(...)` / `dst[...] = op(...)` make it land in an existing
        tile (issue 8 item 17); the next instruction checks again, by then it is either consumed
        (released) or held by the kernel (counted)."""
        live = self.live
        if live["sbuf"] <= limits.SBUF_BYTES_PER_PARTITION and live["psum"] <= limits.PSUM_BYTES_PER_PARTITION:
            self.dirty = False        # fits even counting the result
            return
        ex_buf, ex = None, 0
        if result is not None and result.token is not None and not result.token[2] and result.origin[1] == 0:
            ex_buf, ex = result.buffer, result.token[1]
        self.dirty = bool(ex)
        if not self.options.check_capacity or (
                live["sbuf"] - (ex if ex_buf == "sbuf" else 0) <= limits.SBUF_BYTES_PER_PARTITION and
                live["psum"] - (ex if ex_buf == "psum" else 0) <= limits.PSUM_BYTES_PER_PARTITION):
            return
        for buf, limit, code, fix in (
            ("sbuf", limits.SBUF_BYTES_PER_PARTITION, "E006",
             "Free tiles earlier (allocate them inside the loop that uses them) or use smaller tiles"),
            ("psum", limits.PSUM_BYTES_PER_PARTITION, "E005",
             "PSUM has 8 banks of 2 KiB per partition: keep at most 8 live PSUM tiles of 512 fp32"),
        ):
            if self.live[buf] - (ex if ex_buf == buf else 0) > limit:
                biggest = sorted(self.tiles[buf].values(), key=lambda t: -t[1])[:4]
                desc = ", ".join(f"{t[5] or 't%d' % t[4]}{tuple(t[6])} {t[1]} B from "
                                 f"{os.path.basename(t[7][0])}:{t[7][1]}" for t in biggest)
                raise SimValueError(code, api, buf,
                                    f"live {buf.upper()} bytes per partition exceed capacity "
                                    f"(largest live tiles: {desc})", fix,
                                    got=self.live[buf], limit=limit)
