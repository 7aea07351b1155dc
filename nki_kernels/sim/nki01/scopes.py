"""Kernel-source rules of the NKI 0.1 front end, decided from the kernel's source (``kernel_ast``) and confirmed
at run time (docs/nki-0.1-rules.md §9 "Scopes", §10, §11 items 2-5):

* tensor scopes (E027, ERR ``err_local_variable_used_out_of_scope``): a tensor created inside a symbolic loop
  body (``affine_range``, ``sequential_range``, a ``range`` in the kernel function) or a predicated ``if``/``else``
  (its test mentions a symbolic loop index or ``nl.program_id``) cannot be used after the block;
* ``shared_hbm`` placement (E013, ERR ``err_shared_hbm_must_in_kernel_level``): only at the kernel's top level;
* annotated shapes (E011, ERR ``err_annotation_shape_mismatch``): ``x: nt.tensor[128, 512] = <tile>``.

ERR = aws-neuron-sdk@49ee15c5 ``general/nki/api/nki.errors.rst``.  The static pass names candidate lines; the
run-time check reads the user frame's locals only on those lines (``RunContext.scopes.on_call``, called by
``core.context.enter`` at every NKI call), so kernels without candidates pay one dict lookup per call.
"""

from __future__ import annotations

import ast
import linecache
import re
import types
from dataclasses import dataclass, field

from .. import kernel_ast
from ..core.context import lenient
from ..core.errors import NKISyntaxError, SimValueError, user_frame
from ..core.tensor import Tensor
from ..core.trace import LoopKind

_SCOPED_LOOPS = (LoopKind.AFFINE, LoopKind.SEQUENTIAL, LoopKind.RANGE)
_NKI_ITERATORS = ("affine", "sequential", "static", "range")


@dataclass(frozen=True)
class _Use:
    """A read of ``name`` on a line: after the block (``carried`` False) or, in a loop body, before the name is
    rebound, i.e. of the previous iteration's value (``carried`` True)."""

    name: str
    block: kernel_ast.Block
    symbolic: bool | None  # loop blocks: the static verdict; predicated if/else blocks: True
    bind_lines: tuple[int, ...]
    carried: bool


@dataclass
class _CodeRules:
    """What the source says about one code object."""

    fs: kernel_ast.FunctionSource | None
    uses: dict[int, tuple[_Use, ...]] = field(default_factory=dict)
    predicated: frozenset[int] = frozenset()  # ids of IF/ELSE blocks of predicated ifs
    annotations: tuple[kernel_ast.AnnotatedAssign, ...] = ()
    active: bool = False  # any per-call work (uses or annotations)


_CACHE: dict[tuple[types.CodeType, bool], _CodeRules] = {}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _calls_program_id(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and (kernel_ast._dotted(n.func) or "").split(".")[-1] == "program_id"
        for n in ast.walk(node)
    )


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function body, nested functions and lambdas excluded (they have their own code)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _predicated_ifs(fn: ast.AST, fs: kernel_ast.FunctionSource) -> frozenset[int]:
    """Blocks of the ``if``s whose test is an index predicate: it mentions a symbolic loop target (or a name
    assigned from an expression using one -- simple intra-function dataflow) or calls ``nl.program_id``.  A
    Python-valued ``if`` opens no scope (§11.2: AWS's flash_fwd and rmsnorm_quant rely on that)."""
    nodes = _own_nodes(fn)
    index: set[str] = {t for lp in fs.loops if lp.symbolic for t in lp.targets}
    assigns = sorted(
        (n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr))),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for _ in range(3):
        before = len(index)
        for a in assigns:
            value = a.value
            if value is None or not (_names(value) & index or _calls_program_id(value)):
                continue
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            for t in targets:
                index.update(kernel_ast._target_names(t))
        if len(index) == before:
            break
    blocks: set[int] = set()
    tests = {n.lineno: n.test for n in nodes if isinstance(n, ast.If)}
    for site in fs.ifs:
        test = tests.get(site.line)
        if test is not None and (_names(test) & index or _calls_program_id(test)):
            blocks.add(site.body_block)
            if site.else_block is not None:
                blocks.add(site.else_block)
    return frozenset(blocks)


def _rules(code: types.CodeType, kernel: bool, module_globals: dict | None) -> _CodeRules:
    key = (code, kernel)
    r = _CACHE.get(key)
    if r is not None:
        return r
    fs = kernel_ast.analyze_code(code, kernel_scope=kernel, module_globals=module_globals)
    node = kernel_ast._lookup(code, module_globals)[0] if fs is not None else None
    if fs is None or node is None:
        r = _CACHE[key] = _CodeRules(None)
        return r
    predicated = _predicated_ifs(node, fs)
    # `b = nl.loop_reduce(a, ...)`: "the destination tile is also the rhs input" (2.26 nki.language
    # loop_reduce): it reduces into the tile `b` already holds, so it binds no new tensor in the block
    reduce_lines = {
        n.lineno
        for n in _own_nodes(node)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and (kernel_ast._dotted(n.value.func) or "").split(".")[-1] == "loop_reduce"
    }
    loops = {lp.block: lp for lp in fs.loops}
    uses: dict[int, list[_Use]] = {}
    for c in fs.scope_candidates:
        if set(c.bind_lines) <= reduce_lines:
            continue
        b = fs.block(c.block)
        if b.kind is kernel_ast.BlockKind.FOR:
            lp = loops.get(b.id)
            if lp is None or lp.symbolic is False or lp.iterator not in _NKI_ITERATORS + ("other",):
                continue
            symbolic = lp.symbolic
        elif b.kind in (kernel_ast.BlockKind.IF, kernel_ast.BlockKind.ELSE) and b.id in predicated:
            symbolic = True
        else:
            continue
        for line in c.use_lines:
            uses.setdefault(line, []).append(_Use(c.name, b, symbolic, c.bind_lines, False))
        if not c.use_lines and b.kind is kernel_ast.BlockKind.FOR:
            for line in c.carried_lines:
                uses.setdefault(line, []).append(_Use(c.name, b, symbolic, c.bind_lines, True))
    anns = tuple(a for a in fs.annotations if a.shape is not None)
    r = _CodeRules(fs, {k: tuple(v) for k, v in uses.items()}, predicated, anns, bool(uses or anns))
    _CACHE[key] = r
    return r


def _born_in(al: object, b: kernel_ast.Block, symbolic: bool | None, filename: str) -> object | None:
    """The LoopFrame (or True) showing that allocation ``al`` was created inside block ``b``; None if not."""
    for fr in al.born_loops:  # type: ignore[attr-defined]
        if fr.line == b.line and fr.file == filename and fr.kind in _SCOPED_LOOPS:
            return fr
    if symbolic:
        site = al.born_site  # type: ignore[attr-defined]
        if site[0] == filename and site[1] in b.body:
            return True
    return None


def _def_line(code: types.CodeType) -> int:
    """The line of the ``def`` statement of ``code`` (``co_firstlineno`` is the first decorator's)."""
    lines = linecache.getlines(code.co_filename)
    for ln in range(code.co_firstlineno, min(len(lines), code.co_firstlineno + 50) + 1):
        if re.match(r"\s*(async\s+)?def\s", lines[ln - 1]):
            return ln
    return code.co_firstlineno


class SourceRules:
    """``RunContext.scopes`` of an NKI 0.1 run: the kernel function's code object, the checks per call."""

    __slots__ = ("kernel_code", "globals", "checked", "by_id", "quiet", "kernel_calls")

    def __init__(
        self,
        kernel_code: types.CodeType | None,
        module_globals: dict | None,
        kernel_calls: frozenset[types.CodeType] = frozenset(),
    ) -> None:
        self.kernel_code = kernel_code
        # code objects of the interpreter's kernel __call__: a function they call inside the run is an @nki.jit
        # kernel called from the kernel (its top level counts as kernel level for shared_hbm, a decision)
        self.kernel_calls = kernel_calls
        self.globals = module_globals
        self.checked: set[tuple[int, int]] = set()  # (id(frame), annotation line) already compared
        # id(code) -> (code, rules): hashing a code object hashes its contents, an id does not (the code is
        # kept alive here, so its id is not reused during the run)
        self.by_id: dict[int, tuple[types.CodeType, _CodeRules]] = {}
        # ids of the code objects (kept alive in by_id) with nothing to check per call: core.context.enter
        # skips the call for them
        self.quiet: set[int] = set()

    def _get(self, code: types.CodeType) -> _CodeRules:
        kernel = code is self.kernel_code
        r = _CACHE.get((code, kernel))
        return r if r is not None else _rules(code, kernel, self.globals if kernel else None)

    # -- every NKI call ------------------------------------------------------------------------------
    def on_call(self, ctx: object, f: types.FrameType) -> None:
        code = f.f_code
        hit = self.by_id.get(id(code))
        if hit is None:
            hit = self.by_id[id(code)] = (code, self._get(code))
            if not hit[1].active:
                self.quiet.add(id(code))
        r = hit[1]
        if not r.active:
            return
        line = f.f_lineno
        uses = r.uses.get(line)
        if uses:
            self._check_uses(ctx, f, line, uses)
        if r.annotations:
            self._check_annotations(f, r.annotations)

    def _check_uses(self, ctx: object, f: types.FrameType, line: int, uses: tuple[_Use, ...]) -> None:
        loc = f.f_locals
        filename = f.f_code.co_filename
        active = {fr.loop_id: fr for fr in ctx.loops}  # type: ignore[attr-defined]
        for u in uses:
            v = loc.get(u.name)
            if not isinstance(v, Tensor):
                continue  # Python values, indices, lists: no tensor scope
            born = _born_in(v.alloc, u.block, u.symbolic, filename)
            if born is None:
                continue
            block = f"{u.block.kind.value} block at line {u.block.line}"
            bound = ", ".join(str(b) for b in u.bind_lines)
            if not u.carried:
                if isinstance(born, tuple) and born.loop_id in active:  # type: ignore[attr-defined]
                    continue  # the loop entry that created it is still running
                raise NKISyntaxError(
                    "E027",
                    "scope",
                    u.name,
                    f"Local variable '{u.name}' is referenced outside of its parent scope: the tensor was created "
                    f"in the {block} (line {bound}), a control block with its own tensor scope "
                    "(ERR err_local_variable_used_out_of_scope)",
                    f"Allocate `{u.name}` before the block (nl.ndarray) and write it inside with "
                    f"{u.name}[...] = ..., then use it after the block",
                )
            # a read of the tensor an earlier iteration created (the body is traced once: hardware reads the
            # tensor from before the loop) -- §11.5: a warning by default, E027 under strict
            if isinstance(born, tuple):
                cur = active.get(born.loop_id)  # type: ignore[attr-defined]
                if cur is not None and cur.iteration == born.iteration:  # type: ignore[attr-defined]
                    continue  # this iteration's own tensor (an earlier entry's, cur None, is carried too)
            what = (
                f"`{u.name}` read at line {line} is the tensor an earlier iteration of the {block} created "
                f"(line {bound}); NKI traces a loop body once, so on hardware this reads the tensor from before "
                f"the loop.  Update it in place ({u.name}[...] = ...) or use a tensor allocated before the loop"
            )
            lenient(
                "pm.scope_carried",
                what + " (ERR err_local_variable_used_out_of_scope)",
                op="scope",
                arg=u.name,
                where=(filename, line),
            )

    def _check_annotations(self, f: types.FrameType, anns: tuple[kernel_ast.AnnotatedAssign, ...]) -> None:
        """``x: nt.tensor[shape] = value``: Python never evaluates a local annotation, so the shape is compared
        at the first NKI call of the frame after the assignment (ERR err_annotation_shape_mismatch)."""
        line = f.f_lineno
        loc = None
        for a in anns:
            if a.line >= line or (id(f), a.line) in self.checked:
                continue
            self.checked.add((id(f), a.line))
            loc = f.f_locals if loc is None else loc
            v = loc.get(a.target)
            if not isinstance(v, Tensor) or a.shape is None:
                continue
            want: list[int] = []
            for d in a.shape:
                if isinstance(d, int):
                    want.append(d)
                    continue
                try:
                    want.append(int(eval(d, f.f_globals, dict(loc))))  # noqa: S307 -- the user's own annotation
                except Exception:  # noqa: BLE001 -- an expression we cannot evaluate: no check
                    return
            if tuple(want) != tuple(v.shape):
                raise SimValueError(
                    "E011",
                    "annotation",
                    a.target,
                    f"shape of `{a.target}{list(v.shape)}` does not match the expected shape of {want} "
                    "(ERR err_annotation_shape_mismatch)",
                    f"Annotate `{a.target}` with the shape of the value bound to it, or fix the value's shape",
                    where=(f.f_code.co_filename, a.line),
                )

    # -- shared_hbm placement ---------------------------------------------------------------------------
    def check_shared_hbm(self, api: str) -> None:
        """ERR err_shared_hbm_must_in_kernel_level: a ``shared_hbm`` tensor is created at the kernel function's
        top level -- not in a loop (symbolic, a kernel-level ``range``, or ``static_range``: §11.4), under a
        predicated ``if`` or in a helper; a Python-valued ``if`` is allowed (§11.3)."""
        f = user_frame()
        if f is None or self.kernel_code is None:
            return
        code = f.f_code
        if code is not self.kernel_code and code.co_name.startswith("<") and code.co_name != "<lambda>":
            return  # a comprehension in the kernel: not a helper (sources silent; allowed)
        fix = "Create shared_hbm tensors (kernel outputs) at the top level of the kernel function and pass them on"
        what = "shared_hbm buffer can only be created top level kernel scope"
        caller = f.f_back
        nested_kernel = caller is not None and caller.f_code in self.kernel_calls
        if code is not self.kernel_code and not nested_kernel:
            raise NKISyntaxError("E013", api, "buffer", f"{what}: `{code.co_name}` is a function the kernel calls", fix)
        r = self._get(code)
        fs = r.fs
        if fs is None:
            return
        line = f.f_lineno
        loops = {lp.block: lp for lp in fs.loops}
        for b in fs.blocks_at(line):
            lp = loops.get(b.id)
            if b.kind is kernel_ast.BlockKind.FOR and lp is not None and lp.iterator in _NKI_ITERATORS:
                raise NKISyntaxError("E013", api, "buffer", f"{what}: it is inside the loop at line {b.line}", fix)
            if b.id in r.predicated:
                raise NKISyntaxError(
                    "E013",
                    api,
                    "buffer",
                    f"{what}: it is under the `if` on a loop index / program_id at line {b.line}",
                    fix,
                )


def kernel_def_line(code: types.CodeType) -> int:
    """The ``def`` line of a kernel function (rules about the kernel as a whole blame it)."""
    return _def_line(code)
