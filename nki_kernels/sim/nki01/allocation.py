"""NKI 0.1 direct allocation (``ncc.sbuf/psum.alloc`` / ``mod_alloc``): the rules the compiler applies to
a kernel that places its SBUF/PSUM tensors itself (E030, E026 for start partitions).

Sources (aws-neuron-sdk 49ee15c5, SDK 2.26): ``general/nki/nki_direct_allocation_guide.rst`` (DA:
"Common Errors" 1-3, "Known Limitations" 1-2), ``general/nki/api/nki/compiler/{sbuf,psum,__init__}.py``
(CMP docstrings), ``general/nki/api/nki.errors.rst`` (ERR ``err_bias_tensor_must_be_specified_in_allocation``,
``err_tensor_creation_on_scratchpad_with_init_value_not_supported``,
``err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel``), ``general/nki/nki_known_issues.rst``.

A run becomes a direct-allocation run at its first ``alloc``/``mod_alloc`` tensor (per buffer: CMP
``auto_alloc``: "All SBUF [PSUM] tensors in a kernel must either all be marked as auto_alloc(), or all be
allocated with alloc or mod_alloc").  What an earlier line did that such a kernel may not do (an automatic
tensor, a non-IO HBM tensor) is remembered and reported, at its own line, when the run becomes one.

Lifetimes (DA "Lifetime Conflicts"): the interpreter executes eagerly, so it models the physical tiles: each
write of a logical block claims its physical rectangle (start partition, partitions) x (byte address, bytes);
a later read of a block whose rectangle another block claimed since is the conflict, blamed at the line of
the overwriting write.  Needs the instruction trace (``SimOptions.trace``, the default).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import limits
from ..core.errors import NKISyntaxError, SimValueError

PSUM_BANK_BYTES = 2048


def _tuple(x: object, name: str, api: str) -> tuple[int, ...]:
    if x is None:
        return ()
    if isinstance(x, int):
        return (int(x),)
    try:
        return tuple(int(v) for v in x)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise NKISyntaxError(
            "E030", api, name, f"{name} must be a tuple of ints, got {x!r}", "Pass e.g. num_free_tiles=(2,)"
        ) from None


def _linear(shape: tuple[int, ...], idx: tuple[int, ...]) -> int:
    """The modulo allocator's tile number of block ``idx`` (CMP mod_alloc: index modulo the tile counts,
    linearised row-major); an empty ``shape`` is one tile."""
    if not shape:
        return 0
    n = 0
    for i, s in zip(idx, shape, strict=False):
        n = n * s + (i % s)
    return n


@dataclass(frozen=True)
class Placement:
    """How a directly allocated tensor's logical blocks map to physical tiles."""

    buffer: str  # "sbuf" | "psum"
    kind: str  # "alloc" | "mod_alloc"
    func: Callable[..., Any] | None = None
    base_addr: int = 0
    base_partition: int = 0
    base_bank: int = 0
    num_bank_tiles: tuple[int, ...] = ()
    num_par_tiles: tuple[int, ...] = ()
    num_free_tiles: tuple[int, ...] = ()

    def tiles(self) -> int:
        """Physical tiles of a mod_alloc (the product of the tile counts; empty = 1)."""
        n = 1
        for t in self.num_bank_tiles + self.num_par_tiles + self.num_free_tiles:
            n *= int(t)
        return n

    def api(self) -> str:
        return f"nki.compiler.{self.buffer}.{self.kind}"


def mod_alloc_placement(buffer: str, kwargs: dict[str, Any]) -> Placement:
    api = f"nki.compiler.{buffer}.mod_alloc"
    return Placement(
        buffer,
        "mod_alloc",
        base_addr=int(kwargs.get("base_addr", kwargs.get("byte_addr", 0)) or 0),
        base_partition=int(kwargs.get("base_partition", 0) or 0),
        base_bank=int(kwargs.get("base_bank", 0) or 0),
        num_bank_tiles=_tuple(kwargs.get("num_bank_tiles", ()), "num_bank_tiles", api),
        num_par_tiles=_tuple(kwargs.get("num_par_tiles", ()), "num_par_tiles", api),
        num_free_tiles=_tuple(kwargs.get("num_free_tiles", ()), "num_free_tiles", api),
    )


# NL APIs that the compiler lowers to several instructions with intermediate tensors of its own (DA "Common
# Errors" 2 names nl.softmax as the example of "many high-level nki.language APIs")
IMPLICIT_TENSOR_APIS = frozenset({"softmax", "rms_norm", "var", "mean", "dropout"})


@dataclass
class _Tile:
    """One physical tile claim: the rectangle and the logical block that last wrote it."""

    alloc_id: int
    block: int
    name: str
    p0: int
    p1: int
    a0: int
    a1: int
    line: tuple[str, int]


@dataclass
class _Tensor:
    name: str
    placement: Placement
    nblocks: int
    block_row: int  # storage bytes of one block within a partition row
    rects: list[tuple[int, int, int, int]]  # per logical block: (p0, p1, a0, a1)


@dataclass
class DirectAllocation:
    """Per-run state of the direct-allocation rules (``RunContext.direct``)."""

    active: set[str] = field(default_factory=set)  # buffers allocated directly ("sbuf", "psum")
    forced_auto: bool = False  # @ncc.force_auto_alloc: directives ignored
    first_auto: dict[str, tuple[str, tuple[Any, ...]]] = field(default_factory=dict)
    first_hbm: tuple[str, tuple[str, int]] | None = None
    shared_hbm: list[tuple[Any, tuple[str, int]]] = field(default_factory=list)
    tensors: dict[int, _Tensor] = field(default_factory=dict)
    owners: dict[str, list[_Tile]] = field(default_factory=lambda: {"sbuf": [], "psum": []})
    claims: dict[tuple[int, int], _Tile] = field(default_factory=dict)
    clobbered: dict[tuple[int, int], _Tile] = field(default_factory=dict)
    # placements per declaration site within one entry of its symbolic loops: (file, line, loop ids) -> rects
    sites: dict[tuple[Any, ...], list[tuple[int, int, int, int]]] = field(default_factory=dict)

    # -- becoming a direct-allocation run ----------------------------------------------------------------
    def activate(self, buffer: str) -> None:
        if self.forced_auto or buffer in self.active:
            return
        self.active.add(buffer)
        earlier = self.first_auto.get(buffer)
        if earlier is not None:
            raise mixed_error(buffer, earlier[0], earlier[1])
        if self.first_hbm is not None:
            raise non_io_hbm_error(*self.first_hbm)

    def is_active(self) -> bool:
        return bool(self.active)

    # -- tensors the kernel creates ------------------------------------------------------------------------
    def automatic(self, buffer: str, what: str, where: tuple[Any, ...], api: str = "") -> None:
        """An automatically allocated SBUF/PSUM tensor (a declaration, or -- ``api`` given, ``what`` empty --
        the new tile an instruction returned)."""
        if buffer in self.active:
            raise mixed_error(buffer, what or f"the tile returned by {api}", where)
        if buffer not in self.first_auto:
            self.first_auto[buffer] = (what or f"the tile returned by {api}", where)

    def hbm(self, buffer: str, tensor: Any, where: tuple[str, int]) -> None:
        """An HBM tensor declared in the kernel (DA "Known Limitations" 1)."""
        if buffer == "shared_hbm":
            self.shared_hbm.append((tensor, where))
            return
        what = f"`{getattr(tensor, 'name', '?')}` in {buffer}"
        if self.active:
            raise non_io_hbm_error(what, where)
        if self.first_hbm is None:
            self.first_hbm = (what, where)

    def place(
        self,
        tensor: Any,
        placement: Placement,
        shape: tuple[int, ...],
        par: int,
        itemsize: int,
        where: tuple[str, int],
        loops: tuple[Any, ...] = (),
    ) -> None:
        """A tensor declared with ``alloc``/``mod_alloc``: validate the placement of every block (E026, E030).

        The front end traces a symbolic loop's body once (PM "Representing data in NKI"), so a declaration in
        an ``affine_range``/``sequential_range`` body has the placement of its first iteration in every
        iteration: Python state that the body advances (AWS's allocated_attention.py bumps ``cur_addr`` after
        each declaration) does not move it.  ``loops``: the enclosing ``RunContext.loops``."""
        site = (where[0], where[1]) + tuple(f.loop_id for f in loops if f.kind.value != "static")
        if len(site) > 2:
            rects_seen = self.sites.get(site)
            if rects_seen is not None:
                al = tensor.alloc
                nblocks = max(len(rects_seen), 1)
                self.tensors[al.id] = _Tensor(al.name, placement, nblocks, al.row_bytes // nblocks, rects_seen)
                return
        api = placement.api()
        blocks = tuple(shape[:par])
        nb = len(blocks)
        pdim = shape[par]
        fdim = itemsize
        for s in shape[par + 1 :]:
            fdim *= s
        if placement.kind == "mod_alloc":
            if placement.buffer == "psum" and (placement.base_addr or placement.base_partition):
                # DA "Known Limitations" 2; CMP psum.mod_alloc
                raise NKISyntaxError(
                    "E030",
                    api,
                    "base_addr",
                    "psum.mod_alloc needs base_addr=0 and base_partition=0: "
                    "a PSUM tile starts at partition 0 of its own bank "
                    f"(got base_addr={placement.base_addr}, "
                    f"base_partition={placement.base_partition})",
                    "Choose the bank with base_bank= (and num_bank_tiles=)",
                    where=where,
                )
            if placement.buffer == "sbuf" and placement.base_partition:
                # CMP sbuf.mod_alloc base_partition: "Must be 0 in the current version"
                raise NKISyntaxError(
                    "E030",
                    api,
                    "base_partition",
                    f"sbuf.mod_alloc needs base_partition=0, got {placement.base_partition}",
                    "Drop base_partition",
                    where=where,
                )
            for name in ("num_bank_tiles", "num_par_tiles", "num_free_tiles"):
                t = getattr(placement, name)
                # CMP sbuf/psum.mod_alloc: "The length of the tuple must be empty or equal to the length of block
                # dimension for the tensor".  Decision: enforced for tensors with block dimensions; for a tensor
                # without any (one logical tile, nothing to take a modulo of) the tuple is ignored -- AWS's
                # attention tutorial v9 (nki-samples attention_kernels.py) passes num_free_tiles=(n,) there, and
                # the SDK's reference modulo function (nki/test test_sbuf_modulo_alloc.py) zips it away.
                if t and nb and len(t) != nb:
                    raise NKISyntaxError(
                        "E030",
                        api,
                        name,
                        f"{name}={t} has {len(t)} entries but the tensor {shape} has {nb} block "
                        "dimension(s): the tuple must be empty or have one entry per block dimension",
                        f"Use {name}=({', '.join(['2'] * nb) if nb else ''}{',' if nb == 1 else ''})"
                        if nb
                        else f"Drop {name} (the tensor has no block dimension)",
                        where=where,
                    )
                if any(v < 1 for v in t):
                    raise NKISyntaxError("E030", api, name, f"{name}={t}: every tile count must be >= 1", where=where)
        rects = []
        if placement.buffer == "psum" and fdim > PSUM_BANK_BYTES:
            raise NKISyntaxError(
                "E030",
                api,
                "fdim_size",
                f"a directly allocated PSUM tile cannot cross a bank: "
                f"{fdim} bytes per partition > 2 KiB (DA 'Known Limitations' 3)",
                "Use at most 512 fp32 per partition per tile",
                where=where,
            )
        for idx in itertools.product(*[range(b) for b in blocks]):
            if placement.kind == "alloc":
                assert placement.func is not None
                try:
                    loc = _call_alloc_func(placement.func, tuple(idx), pdim, fdim)
                except Exception as e:  # the user's allocation function failed
                    raise NKISyntaxError(
                        "E030",
                        api,
                        "func",
                        f"the allocation function raised {type(e).__name__}: {e} for block {tuple(idx)}",
                        "Return (start_partition, byte_addr) for sbuf, (bank, start_partition, byte_addr) for psum",
                        where=where,
                    ) from None
                loc = tuple(int(v) for v in loc) if isinstance(loc, (tuple, list)) else ()
                want = 2 if placement.buffer == "sbuf" else 3
                if len(loc) != want:
                    raise NKISyntaxError(
                        "E030",
                        api,
                        "func",
                        f"the allocation function must return {want} ints for block {tuple(idx)}, got {loc!r}",
                        where=where,
                    )
                bank, sp, addr = (0, loc[0], loc[1]) if want == 2 else loc
                if want == 3 and (sp or addr):
                    # CMP psum.alloc: "start_partition and byte_addr must both be 0" in the current release
                    raise NKISyntaxError(
                        "E030",
                        api,
                        "func",
                        f"a PSUM tile starts at partition 0, byte 0 of its bank; "
                        f"the allocation function returned {loc!r} for block {tuple(idx)}",
                        "Return (bank, 0, 0)",
                        where=where,
                    )
            else:
                bank = placement.base_bank + _linear(placement.num_bank_tiles, idx)
                sp = placement.base_partition + _linear(placement.num_par_tiles, idx) * pdim
                addr = placement.base_addr + _linear(placement.num_free_tiles, idx) * fdim
            check_start_partition(api, sp, pdim, tuple(idx), where)
            _check_bounds(api, placement.buffer, bank, sp, pdim, addr, fdim, tuple(idx), where)
            if placement.buffer == "psum":
                addr += bank * PSUM_BANK_BYTES
            rects.append((sp, sp + pdim, addr, addr + fdim))
        al = tensor.alloc
        nblocks = max(len(rects), 1)
        self.tensors[al.id] = _Tensor(al.name, placement, nblocks, al.row_bytes // nblocks if nblocks else 0, rects)
        if len(site) > 2:
            self.sites[site] = rects

    # -- lifetimes ----------------------------------------------------------------------------------------
    def instruction(self, reads: Sequence[Any], writes: Sequence[Any], where: tuple[str, int]) -> None:
        """An instruction's read and write regions (trace.Region): check reads, then claim the writes."""
        tensors = self.tensors
        for r in reads:
            t = tensors.get(r.alloc_id)
            if t is None or r.hi <= r.lo:
                continue
            for b in _blocks(t, r):
                bad = self.clobbered.get((r.alloc_id, b))
                if bad is not None:
                    raise lifetime_error(t, b, bad, where)
        for w in writes:
            t = tensors.get(w.alloc_id)
            if t is None or w.hi <= w.lo:
                continue
            for b in _blocks(t, w):
                self._claim(t, w.alloc_id, b, where)

    def _claim(self, t: _Tensor, alloc_id: int, block: int, where: tuple[str, int]) -> None:
        key = (alloc_id, block)
        p0, p1, a0, a1 = t.rects[block]
        owners = self.owners[t.placement.buffer]
        keep = []
        new = _Tile(alloc_id, block, t.name, p0, p1, a0, a1, where)
        for o in owners:
            if (o.alloc_id, o.block) == key:
                continue
            if o.p0 < p1 and p0 < o.p1 and o.a0 < a1 and a0 < o.a1:
                self.clobbered[(o.alloc_id, o.block)] = new
                self.claims.pop((o.alloc_id, o.block), None)
                continue
            keep.append(o)
        keep.append(new)
        self.owners[t.placement.buffer] = keep
        self.claims[key] = new
        self.clobbered.pop(key, None)

    # -- the kernel's end -----------------------------------------------------------------------------------
    def finish(self, result: Any) -> None:
        if not self.active:
            return
        returned: set[int] = set()
        stack = [result]
        while stack:
            x = stack.pop()
            if isinstance(x, (tuple, list)):
                stack.extend(x)
            elif hasattr(x, "alloc"):
                returned.add(x.alloc.id)
        for t, where in self.shared_hbm:
            if t.alloc.id not in returned:
                # DA "Known Limitations" 1: "All tensors declared with buffer=nl.shared_hbm must be returned"
                raise NKISyntaxError(
                    "E030",
                    "return",
                    t.name,
                    f"`{t.name}` is a shared_hbm tensor the kernel does not return: with direct "
                    "allocation every HBM tensor the kernel declares must be a kernel output",
                    f"Return it (return ..., {t.name}) or keep the data on chip",
                    where=where,
                )


def _call_alloc_func(func: Callable[..., Any], idx: tuple[int, ...], pdim: int, fdim: int) -> Any:
    """The allocation function's placement of block ``idx``: called with the documented keyword names (AWS's
    allocated_attention.py binds its first parameter with functools.partial(psum_addr, bank_map=...), which
    only keyword arguments reach), else positionally."""
    try:
        return func(idx=idx, pdim_size=pdim, fdim_size=fdim)
    except TypeError:
        return func(idx, pdim, fdim)


def _blocks(t: _Tensor, r: Any) -> range:
    if t.nblocks <= 1 or not t.block_row:
        return range(0, 1)
    return range(r.lo // t.block_row, min((r.hi - 1) // t.block_row + 1, t.nblocks))


def _check_bounds(
    api: str,
    buffer: str,
    bank: int,
    sp: int,
    pdim: int,
    addr: int,
    fdim: int,
    idx: tuple[int, ...],
    where: tuple[str, int],
) -> None:
    """A physical tile inside the memory: SBUF bytes [0, nl.tile_size.total_available_sbuf_size) per partition
    (DA "ncc.sbuf.alloc()": byte_addr below the usable partition size), PSUM banks 0..7 of 2 KiB."""
    if buffer == "sbuf":
        top = limits.SBUF_BYTES_PER_PARTITION
        if addr < 0 or addr + fdim > top:
            raise NKISyntaxError(
                "E030",
                api,
                "byte_addr",
                f"block {idx} occupies SBUF bytes [{addr}, {addr + fdim}) "
                f"per partition, outside the {top} usable bytes",
                "Place it at a lower byte_addr (or use fewer / smaller tiles)",
                where=where,
            )
    elif (
        not 0 <= bank < limits.PSUM_BYTES_PER_PARTITION // PSUM_BANK_BYTES or addr < 0 or addr + fdim > PSUM_BANK_BYTES
    ):
        raise NKISyntaxError(
            "E030",
            api,
            "bank",
            f"block {idx} is placed in PSUM bank {bank} at byte {addr} "
            f"({fdim} bytes): PSUM has 8 banks of 2 KiB per partition",
            "Use banks 0..7 (base_bank + num_bank_tiles <= 8)",
            where=where,
        )
    if sp + pdim > limits.PMAX:
        raise NKISyntaxError(
            "E030",
            api,
            "start_partition",
            f"block {idx} spans partitions [{sp}, {sp + pdim}), past partition {limits.PMAX}",
            "Start it at a lower partition",
            where=where,
        )


def check_start_partition(api: str, sp: int, pdim: int, idx: tuple[int, ...], where: tuple[str, int]) -> None:
    """CMP sbuf.alloc / DA "ncc.sbuf.alloc()": the start partition of a physical tile by its partition count."""
    allowed = (0,) if pdim > 64 else (0, 64) if pdim > 32 else (0, 32, 64, 96)
    if sp not in allowed:
        raise SimValueError(
            "E026",
            api,
            "start_partition",
            f"a physical tile of {pdim} partitions cannot start at partition {sp} (block {idx}): "
            f"allowed start partitions are {', '.join(map(str, allowed))}",
            "Return a start partition the ISA allows (0 for more than 64 partitions; 0/64 for 33-64; "
            "0/32/64/96 for up to 32)",
            got=sp,
            limit=allowed,
            where=where,
        )


def mixed_error(buffer: str, what: str, where: tuple[Any, ...]) -> NKISyntaxError:
    return NKISyntaxError(
        "E030",
        "allocation",
        buffer,
        f"{what} is allocated automatically in a kernel that allocates {buffer.upper()} directly: "
        "with direct allocation every tensor, including an instruction's returned tile, must be "
        "placed by the kernel",
        f"Declare it with nl.ndarray(..., buffer=ncc.{buffer}.mod_alloc(...)) and assign the "
        "instruction's result into it (t[...] = nl.load(x))",
        where=(where[0], where[1]),
    )


def non_io_hbm_error(what: str, where: tuple[str, int]) -> NKISyntaxError:
    return NKISyntaxError(
        "E030",
        "allocation",
        "hbm",
        f"{what} is not a kernel input or output: a directly allocated kernel supports no other "
        "HBM tensors (Non IO HBM tensor is not supported in allocated NKI kernel)",
        "Keep intermediate data in SBUF, or make it a returned nl.shared_hbm output",
        where=where,
    )


def lifetime_error(t: _Tensor, block: int, by: _Tile, where: tuple[str, int]) -> NKISyntaxError:
    blk = f" block {block}" if t.nblocks > 1 else ""
    return NKISyntaxError(
        "E030",
        "allocation",
        t.name,
        f"lifetime conflict: `{by.name}` was written to physical memory that `{t.name}`{blk} "
        f"still uses (it is read again at line {where[1]}); their {t.placement.buffer.upper()} "
        "addresses overlap while both are live",
        "Give tensors that live at the same time disjoint addresses, or enough physical tiles "
        "(num_free_tiles / num_bank_tiles) for the blocks live at once",
        where=by.line,
    )


# -- instruction rules of a directly allocated kernel (the front end calls these before the instruction) ------
def active(ctx: Any) -> DirectAllocation | None:
    """The run's direct-allocation state when the kernel allocates directly, else None."""
    d = getattr(ctx, "direct", None) if ctx is not None else None
    return d if d is not None and d.active else None


def check_bias(api: str, bias: object) -> None:
    """ERR err_bias_tensor_must_be_specified_in_allocation (SDK 2.26 nki.errors.rst): an activation (also an
    nl.* op that maps to ScalarE's activation instruction) needs an explicit bias tile."""
    if bias is None:
        raise NKISyntaxError(
            "E030",
            api,
            "bias",
            "Bias tensor of an activation op must be specified in allocated NKI "
            "kernels (the compiler would create an implicit zero-bias tensor)",
            "Declare a (P, 1) bias tile with direct allocation, set it (bias[...] = 0.0) and call "
            "nisa.activation(op=..., data=..., bias=bias)",
        )


def check_tensor_engine_transpose(api: str, what: str) -> None:
    """ERR err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel (SDK 2.26 nki.errors.rst)."""
    raise NKISyntaxError(
        "E030",
        api,
        None,
        f"{what} in an allocated NKI kernel: a TensorE transpose needs an identity "
        "matrix the compiler would allocate itself",
        "Use nisa.nc_transpose(..., engine=nisa.vector_engine) for tiles up to 32x32, "
        "or load your own "
        "directly allocated identity and call nisa.nc_matmul(x, identity)",
    )


def check_implicit_api(api: str) -> None:
    """DA "Common Errors" 2: an API lowered to several instructions with compiler-allocated intermediates."""
    raise NKISyntaxError(
        "E030",
        api,
        None,
        f"{api} is lowered to several instructions whose intermediate tensors "
        "the compiler allocates itself, which an allocated NKI kernel does not allow",
        "Write it with nki.isa instructions into directly allocated tiles (e.g. nisa.activation, nisa.tensor_reduce)",
    )
