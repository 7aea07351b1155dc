"""Static facts about a kernel's source, for both front ends (docs/nki-0.1-rules.md §10).

The real NKI 0.1 front end reads the kernel's Python source: it captures the bodies of ``affine_range`` /
``sequential_range`` loops (and of a ``range`` loop in the kernel function, which it turns into
``sequential_range``: aws-neuron-sdk@49ee15c5 ``general/nki/api/nki/language/__init__.py`` ``sequential_range``),
gives control blocks their own tensor scope (``general/nki/api/nki.errors.rst``
``err_local_variable_used_out_of_scope``) and only lets ``shared_hbm`` tensors be created at the kernel's top level
(``err_shared_hbm_must_in_kernel_level``).  The interpreter executes eagerly, so it needs those facts from the
source.  This module is a pure function from a kernel (or a source string) to a description; it decides nothing:
the runner combines it with what it sees at run time (a name's value is an NKI tensor or a Python int; a loop's
iterator was ``nl.affine_range``; an ``if`` test was a loop-index predicate) before it raises anything.

Entry points: :func:`analyze_kernel` (a function or ``@nki.jit`` kernel, plus the helpers it calls where they
resolve), :func:`analyze_source` (a source string; for tests), :func:`analyze_code` (any code object met at
run time, cached per code object and scope) and :func:`control_flow_site` (what a user's frame does with the
truth value it asks for: the test of an ``if``, another jump, ``and``/``or``, a call).  Line numbers are
absolute lines of the file, as in tracebacks and ``Event.line``.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import dis
import enum
import functools
import inspect
import linecache
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

# Calls that create an NKI tensor in a buffer given by `buffer=` (aws-neuron-sdk@49ee15c5 nki.language).
_CREATORS = frozenset(
    {"ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "ndarray_like", "rand"}
)
_HBM_BUFFERS = frozenset({"shared_hbm", "hbm", "private_hbm"})
_ITERATORS = {"affine_range": "affine", "sequential_range": "sequential", "static_range": "static", "range": "range"}


class BlockKind(str, enum.Enum):
    """A compound statement whose body may open a tensor scope (decided at run time: ``FOR``/``WHILE`` when the
    loop is symbolic, ``IF``/``ELSE`` when the test is a loop-index predicate)."""

    FOR = "for"
    WHILE = "while"
    IF = "if"
    ELSE = "else"
    WITH = "with"
    TRY = "try"


@dataclass(frozen=True)
class Span:
    """Lines ``first..last`` of a file (inclusive)."""

    first: int
    last: int

    def __contains__(self, line: object) -> bool:
        return isinstance(line, int) and self.first <= line <= self.last


@dataclass(frozen=True)
class Block:
    """One control block.  ``line`` is its statement's line (for ``ELSE``: the line of its ``if``); ``parent`` the
    id of the enclosing block (None: the function's top level)."""

    id: int
    kind: BlockKind
    line: int
    body: Span
    parent: int | None


@dataclass(frozen=True)
class LoopSite:
    """A ``for`` loop.  ``iterator`` is what the source calls (``affine``, ``sequential``, ``static``, ``range``,
    or ``other`` for anything else, e.g. a list or a variable holding ``nl.affine_range``); ``symbolic`` is the
    static verdict: True for ``affine``/``sequential``, and for ``range`` in a kernel function or a
    ``mode='trace'`` helper; False for ``static``, for ``range`` in plain helpers (unrolled, nki-samples@0898a77
    rmsnorm_quant NKI-917 note) and for iterables; None when only the run time can tell (``other`` calls)."""

    block: int
    line: int
    iterator: str
    call: str | None
    targets: tuple[str, ...]
    body: Span
    symbolic: bool | None


@dataclass(frozen=True)
class IfSite:
    """An ``if``/``elif`` statement: its test's lines, body block and ``else`` block (None without one).
    ``test_boolop``: the test uses ``and``/``or``/``not`` (never a valid combination of NKI predicates)."""

    line: int
    test: Span
    body_block: int
    else_block: int | None
    is_elif: bool
    test_boolop: bool


@dataclass(frozen=True)
class ScopeCandidate:
    """A name bound inside block ``block`` and read outside it afterwards (``use_lines``) or, in a loop body,
    read before its binding so that a later iteration sees an earlier one's value (``carried_lines``).  An
    error only if, at run time, the block opened a scope and the value read is an NKI tensor created there."""

    name: str
    block: int
    block_kind: BlockKind
    block_line: int
    bind_lines: tuple[int, ...]
    use_lines: tuple[int, ...]
    carried_lines: tuple[int, ...]
    rebinds_outer: bool


@dataclass(frozen=True)
class AllocSite:
    """An HBM tensor creation (``buffer=nl.shared_hbm`` / ``hbm`` / ``private_hbm``) with the blocks around it."""

    line: int
    api: str
    buffer: str
    blocks: tuple[int, ...]

    @property
    def top_level(self) -> bool:
        return not self.blocks


@dataclass(frozen=True)
class AnnotatedAssign:
    """``target: annotation = value`` in a function body.  ``shape``: the subscript of an ``nt.tensor[...]``
    annotation, each entry an int literal or the source text of an expression; None for other annotations."""

    line: int
    target: str
    annotation: str
    shape: tuple[int | str, ...] | None


@dataclass(frozen=True)
class LoopState:
    """A Python name updated inside loop ``block`` (``x += 1``, ``x = x + ...``) and read after the loop: a loop
    body traced once leaves one iteration's value (aws-neuron-sdk@81ce03ae nki/migration/index.rst, "Consistent
    control flow behavior")."""

    name: str
    block: int
    update_lines: tuple[int, ...]
    use_lines: tuple[int, ...]


@dataclass(frozen=True)
class CallSite:
    """A call in the function body: the callee as written (dotted) and, when it resolves statically to a Python
    function, that function's qualified name."""

    line: int
    callee: str
    resolved: str | None


@dataclass(frozen=True)
class FunctionSource:
    """The description of one function (the kernel, a helper, a nested function or a lambda)."""

    name: str
    qualname: str
    filename: str
    span: Span
    is_lambda: bool
    is_trace_helper: bool
    decorators: tuple[str, ...]
    params: tuple[str, ...]
    kwonly_params: tuple[str, ...]
    mutable_params: tuple[str, ...]
    blocks: tuple[Block, ...]
    loops: tuple[LoopSite, ...]
    ifs: tuple[IfSite, ...]
    scope_candidates: tuple[ScopeCandidate, ...]
    allocations: tuple[AllocSite, ...]
    annotations: tuple[AnnotatedAssign, ...]
    loop_state: tuple[LoopState, ...]
    returns: tuple[int, ...]
    returns_value: bool
    returned_names: tuple[str, ...]
    calls: tuple[CallSite, ...]
    nested: tuple[str, ...]
    comprehension_lines: tuple[int, ...]
    global_names: tuple[str, ...]
    nonlocal_names: tuple[str, ...]
    while_lines: tuple[int, ...]
    is_lines: tuple[int, ...]
    direct_allocation_lines: tuple[int, ...]

    def blocks_at(self, line: int) -> tuple[Block, ...]:
        """The blocks whose body contains ``line``, outermost first."""
        return tuple(b for b in self.blocks if line in b.body)

    def block(self, block_id: int) -> Block:
        return self.blocks[block_id]

    def loop_at(self, line: int) -> LoopSite | None:
        """The loop whose ``for`` statement is on ``line``."""
        return next((lp for lp in self.loops if lp.line == line), None)

    def if_test_at(self, line: int) -> IfSite | None:
        """The ``if``/``elif`` whose test covers ``line``."""
        return next((s for s in self.ifs if line in s.test), None)

    def candidates_at(self, line: int) -> tuple[ScopeCandidate, ...]:
        """Scope candidates with a use (after the block, or carried into a later iteration) on ``line``."""
        return tuple(c for c in self.scope_candidates if line in c.use_lines or line in c.carried_lines)


@dataclass(frozen=True)
class KernelSource:
    """What :func:`analyze_kernel` returns.  ``available`` is False when the kernel's source cannot be read
    (built at run time with ``exec``, typed into a REPL, a C function, ...); ``reason`` says why and the runner
    warns once, since the scope, ``range`` and ``shared_hbm`` rules then go unchecked.  ``helpers`` are the
    functions the kernel calls (transitively) that resolved statically, keyed by qualified name."""

    available: bool
    reason: str | None
    kernel: FunctionSource | None
    helpers: Mapping[str, FunctionSource] = field(default_factory=dict)
    unresolved_calls: tuple[CallSite, ...] = ()

    def functions(self) -> Iterator[FunctionSource]:
        if self.kernel is not None:
            yield self.kernel
        yield from self.helpers.values()

    def function_at(self, filename: str, line: int) -> FunctionSource | None:
        """The innermost described function of ``filename`` whose lines contain ``line``."""
        hits = [f for f in self.functions() if f.filename == filename and line in f.span]
        return min(hits, key=lambda f: f.span.last - f.span.first) if hits else None


# ----------------------------------------------------------------------------------------------------------------
# source lookup
# ----------------------------------------------------------------------------------------------------------------


def _attr(obj: object, name: str) -> object | None:
    """``getattr(obj, name, None)`` that also survives modules whose ``__getattr__`` raises a coded error."""
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 -- e.g. E100 from nki_kernels.sim.language.__getattr__
        return None


def _unwrap(obj: object) -> tuple[types.FunctionType | None, bool]:
    """(the Python function behind ``obj``, whether it is a ``mode='trace'`` jit).  Knows the interpreter's
    ``Kernel`` (``.func``, ``.mode``), ``functools.wraps`` chains (``__wrapped__``) and bound methods."""
    trace = False
    seen = 0
    while seen < 8:
        seen += 1
        mode = _attr(obj, "mode")
        if isinstance(mode, str) and mode == "trace":
            trace = True
        inner = _attr(obj, "func")
        if inner is not None and callable(inner) and not isinstance(obj, types.FunctionType):
            obj = inner
            continue
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
            continue
        if isinstance(obj, types.FunctionType):
            return obj, trace
        wrapped = _attr(obj, "__wrapped__")
        if wrapped is None:
            return None, trace
        obj = wrapped
    return None, trace


@functools.lru_cache(maxsize=256)
def _module_tree(filename: str, text: str) -> ast.Module:
    return ast.parse(text, filename=filename)


@functools.lru_cache(maxsize=4096)
def assigned_name(filename: str, line: int) -> str | None:
    """The variable the statement starting at ``filename:line`` binds with a plain assignment (``out =
    nl.ndarray(...)``, ``acc: nt.tensor[...] = ...``), or None (no source, not an assignment, several targets, a
    subscript target).  Messages name a tensor created without ``name=`` by this variable."""
    if line <= 0:
        return None
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        tree = _module_tree(filename, "".join(lines))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != line:
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return node.target.id
    return None


def _find_node(tree: ast.Module, code: types.CodeType) -> ast.AST | None:
    """The def/lambda node of ``code`` in ``tree`` (``co_firstlineno`` is the first decorator's line)."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if code.co_firstlineno in (first, node.lineno):
                return node
        elif isinstance(node, ast.Lambda) and code.co_name == "<lambda>" and node.lineno == code.co_firstlineno:
            best = best or node
    return best


def _lookup(code: types.CodeType, module_globals: Mapping | None) -> tuple[ast.AST | None, str | None]:
    filename = code.co_filename
    lines = linecache.getlines(filename, dict(module_globals) if module_globals is not None else None)
    if not lines:
        return None, f"no source for {filename!r} (code built at run time, a REPL, or a missing file)"
    try:
        tree = _module_tree(filename, "".join(lines))
    except SyntaxError as e:
        return None, f"{filename}: the file does not parse ({e.msg}, line {e.lineno})"
    node = _find_node(tree, code)
    if node is None:
        return None, f"{filename}:{code.co_firstlineno}: {code.co_name} not found in the file (edited since import?)"
    return node, None


# ----------------------------------------------------------------------------------------------------------------
# the per-function pass
# ----------------------------------------------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return None


def _last(node: ast.AST) -> int:
    return getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]


def _body_span(stmts: list[ast.stmt]) -> Span:
    return Span(stmts[0].lineno, max(_last(s) for s in stmts))


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []  # attribute / subscript targets bind no local name


def _is_trace_decorator(dec: ast.expr) -> bool:
    name = _dotted(dec) or ""
    if name.endswith("trace") and not isinstance(dec, ast.Call):
        return True
    if isinstance(dec, ast.Call) and name.split(".")[-1] in ("jit", "trace"):
        if name.split(".")[-1] == "trace":
            return True
        return any(
            kw.arg == "mode" and isinstance(kw.value, ast.Constant) and kw.value.value == "trace" for kw in dec.keywords
        )
    return False


def _tensor_shape(ann: ast.expr) -> tuple[int | str, ...] | None:
    """``nt.tensor[128, 512]`` / ``tensor[128, 512]`` -> (128, 512); ``tensor[[8, 4], dtype]`` -> (8, 4)."""
    if not (isinstance(ann, ast.Subscript) and (_dotted(ann.value) or "").split(".")[-1] == "tensor"):
        return None
    sl = ann.slice
    elts = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
    if elts and isinstance(elts[0], (ast.List, ast.Tuple)):
        elts = list(elts[0].elts)
    out: list[int | str] = []
    for e in elts:
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
            out.append(e.value)
        else:
            out.append(ast.unparse(e))
    return tuple(out)


class _Pass(ast.NodeVisitor):
    """One walk over a function body (nested defs, lambdas and class bodies are recorded, not entered)."""

    def __init__(self, in_kernel_scope: bool) -> None:
        self.in_kernel_scope = in_kernel_scope  # `range` is symbolic here (kernel function or trace helper)
        self.blocks: list[Block] = []
        self.stack: list[int] = []
        self.loops: list[LoopSite] = []
        self.ifs: list[IfSite] = []
        self.binds: list[tuple[str, int, tuple[int, ...], bool]] = []  # name, line, blocks, is_update
        self.loads: list[tuple[str, int, tuple[int, ...]]] = []
        self.allocs: list[AllocSite] = []
        self.annotations: list[AnnotatedAssign] = []
        self.returns: list[int] = []
        self.returns_value = False
        self.returned_names: list[str] = []
        self.calls: list[tuple[int, str]] = []
        self.nested: list[str] = []
        self.comprehensions: list[int] = []
        self.globals: list[str] = []
        self.nonlocals: list[str] = []
        self.whiles: list[int] = []
        self.is_lines: list[int] = []
        self.direct_alloc: list[int] = []
        self.elif_nodes: set[int] = set()

    # -- blocks -------------------------------------------------------------------------------------------------
    def _open(self, kind: BlockKind, line: int, body: list[ast.stmt]) -> int:
        bid = len(self.blocks)
        self.blocks.append(Block(bid, kind, line, _body_span(body), self.stack[-1] if self.stack else None))
        return bid

    def _walk_body(self, bid: int, body: list[ast.stmt]) -> None:
        self.stack.append(bid)
        for s in body:
            self.visit(s)
        self.stack.pop()

    def _bind(self, names: list[str], line: int, update: bool = False) -> None:
        for n in names:
            self.binds.append((n, line, tuple(self.stack), update))

    def visit_For(self, node: ast.For) -> None:  # noqa: N802
        self.visit(node.iter)
        call = _dotted(node.iter) if isinstance(node.iter, ast.Call) else None
        short = call.split(".")[-1] if call else None
        kind = _ITERATORS.get(short or "", "other" if call else "iterable")
        if kind in ("affine", "sequential"):
            symbolic: bool | None = True
        elif kind == "range":
            symbolic = self.in_kernel_scope
        elif kind in ("static", "iterable"):
            symbolic = False
        else:
            symbolic = None
        bid = self._open(BlockKind.FOR, node.lineno, node.body)
        targets = tuple(_target_names(node.target))
        self.loops.append(LoopSite(bid, node.lineno, kind, call, targets, self.blocks[bid].body, symbolic))
        self.stack.append(bid)
        self._bind(list(targets), node.lineno)
        self.stack.pop()
        self._walk_body(bid, node.body)
        if node.orelse:
            self._walk_body(self._open(BlockKind.ELSE, node.lineno, node.orelse), node.orelse)

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_While(self, node: ast.While) -> None:  # noqa: N802
        self.whiles.append(node.lineno)
        self.visit(node.test)
        self._walk_body(self._open(BlockKind.WHILE, node.lineno, node.body), node.body)
        if node.orelse:
            self._walk_body(self._open(BlockKind.ELSE, node.lineno, node.orelse), node.orelse)

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        self.visit(node.test)
        body = self._open(BlockKind.IF, node.lineno, node.body)
        self._walk_body(body, node.body)
        other = None
        if node.orelse:
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                self.elif_nodes.add(id(node.orelse[0]))
            other = self._open(BlockKind.ELSE, node.lineno, node.orelse)
        boolop = any(
            isinstance(n, ast.BoolOp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
            for n in ast.walk(node.test)
        )
        self.ifs.append(
            IfSite(
                node.lineno, Span(node.test.lineno, _last(node.test)), body, other, id(node) in self.elif_nodes, boolop
            )
        )
        if other is not None:
            self._walk_body(other, node.orelse)

    def visit_With(self, node: ast.With) -> None:  # noqa: N802
        for item in node.items:
            self.visit(item.context_expr)
        bid = self._open(BlockKind.WITH, node.lineno, node.body)
        self.stack.append(bid)
        for item in node.items:
            if item.optional_vars is not None:
                self._bind(_target_names(item.optional_vars), node.lineno)
        for s in node.body:
            self.visit(s)
        self.stack.pop()

    visit_AsyncWith = visit_With  # type: ignore[assignment]

    def visit_Try(self, node: ast.Try) -> None:  # noqa: N802
        for part in (node.body, node.orelse, node.finalbody):
            if part:
                self._walk_body(self._open(BlockKind.TRY, part[0].lineno, part), part)
        for h in node.handlers:
            bid = self._open(BlockKind.TRY, h.lineno, h.body)
            if h.name:
                self.stack.append(bid)
                self._bind([h.name], h.lineno)
                self.stack.pop()
            self._walk_body(bid, h.body)

    # -- bindings and uses ---------------------------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:  # noqa: N802
        self.visit(node.value)
        rhs = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        for t in node.targets:
            self.visit(t)
            names = _target_names(t)
            self._bind(names, node.lineno, update=any(n in rhs for n in names))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:  # noqa: N802
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.loads.append((node.target.id, node.lineno, tuple(self.stack)))
            self._bind([node.target.id], node.lineno, update=True)
        else:
            self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:  # noqa: N802
        if node.value is not None:
            self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.annotations.append(
                AnnotatedAssign(
                    node.lineno, node.target.id, ast.unparse(node.annotation), _tensor_shape(node.annotation)
                )
            )
            if node.value is not None:
                self._bind([node.target.id], node.lineno)
        else:
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:  # noqa: N802
        self.visit(node.value)
        self._bind([node.target.id], node.lineno)

    def visit_Name(self, node: ast.Name) -> None:  # noqa: N802
        if isinstance(node.ctx, ast.Load):
            self.loads.append((node.id, node.lineno, tuple(self.stack)))

    def visit_Global(self, node: ast.Global) -> None:  # noqa: N802
        self.globals.extend(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:  # noqa: N802
        self.nonlocals.extend(node.names)

    def visit_Return(self, node: ast.Return) -> None:  # noqa: N802
        self.returns.append(node.lineno)
        if node.value is not None:
            self.returns_value = True
            self.returned_names.extend(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
            self.visit(node.value)

    def visit_Compare(self, node: ast.Compare) -> None:  # noqa: N802
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            self.is_lines.append(node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        callee = _dotted(node.func)
        if callee is not None:
            self.calls.append((node.lineno, callee))
            short = callee.split(".")[-1]
            if short in ("alloc", "mod_alloc") and any(p in callee for p in ("sbuf", "psum")):
                self.direct_alloc.append(node.lineno)
            if short in _CREATORS:
                for kw in node.keywords:
                    buf = (_dotted(kw.value) or "").split(".")[-1] if kw.arg == "buffer" else ""
                    if isinstance(kw.value, ast.Constant) and kw.arg == "buffer" and isinstance(kw.value.value, str):
                        buf = kw.value.value
                    if buf in _HBM_BUFFERS:
                        self.allocs.append(AllocSite(node.lineno, callee, buf, tuple(self.stack)))
        self.generic_visit(node)

    # -- scopes of their own: recorded, not entered ----------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # noqa: N802
        for d in node.decorator_list:
            self.visit(d)
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        self.nested.append(node.name)
        self._bind([node.name], node.lineno)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:  # noqa: N802
        self.nested.append(node.name)
        self._bind([node.name], node.lineno)

    def visit_Lambda(self, node: ast.Lambda) -> None:  # noqa: N802
        self.nested.append(f"<lambda>:{node.lineno}")

    def _comprehension(self, node: ast.AST) -> None:
        # Python 3 comprehensions have their own scope: their targets bind nothing here, but names they read
        # from the function are uses
        self.comprehensions.append(node.lineno)  # type: ignore[attr-defined]
        inner = {n for g in node.generators for n in _target_names(g.target)}  # type: ignore[attr-defined]
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in inner:
                self.loads.append((n.id, n.lineno, tuple(self.stack)))

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _describe(node: ast.AST, filename: str, qualname: str, in_kernel_scope: bool, trace_helper: bool) -> FunctionSource:
    if isinstance(node, ast.Lambda):
        p = _Pass(in_kernel_scope)
        p.visit(node.body)
        args = node.args
        name, body_first = "<lambda>", node.lineno
        decorators: tuple[str, ...] = ()
    else:
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        # a helper decorated @nki.jit(mode='trace') is traced like the kernel function: its `range` loops are
        # sequential_range (nki-samples@0898a77 rmsnorm_quant.py, the NKI-917 workaround)
        trace_helper = trace_helper or any(_is_trace_decorator(d) for d in node.decorator_list)
        p = _Pass(in_kernel_scope or trace_helper)
        for s in node.body:
            p.visit(s)
        args = node.args
        name = node.name
        decorators = tuple(ast.unparse(d) for d in node.decorator_list)
        body_first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    params = tuple(a.arg for a in args.posonlyargs + args.args)
    kwonly = tuple(a.arg for a in args.kwonlyargs)
    mutable = tuple(
        a.arg
        for a in args.posonlyargs + args.args + args.kwonlyargs
        if a.annotation is not None and "mutable_tensor" in ast.unparse(a.annotation)
    )
    globals_ = set(p.globals) | set(p.nonlocals)
    cands: list[ScopeCandidate] = []
    state: list[LoopState] = []
    by_name: dict[str, list[tuple[int, tuple[int, ...], bool]]] = {}
    for n, line, blocks, upd in p.binds:
        if n not in globals_:
            by_name.setdefault(n, []).append((line, blocks, upd))
    for b in p.blocks:
        for n, binds in by_name.items():
            inside = [(ln, upd) for ln, blocks, upd in binds if b.id in blocks]
            if not inside:
                continue
            first_bind = min(ln for ln, _ in inside)
            uses = sorted({ln for nm, ln, blocks in p.loads if nm == n and b.id not in blocks and ln > b.body.last})
            carried: list[int] = []
            if b.kind in (BlockKind.FOR, BlockKind.WHILE):
                carried = sorted({ln for nm, ln, blocks in p.loads if nm == n and b.id in blocks and ln <= first_bind})
            if uses or carried:
                outer = any(ln < b.line and b.id not in blocks for ln, blocks, _ in binds)
                cands.append(
                    ScopeCandidate(
                        n,
                        b.id,
                        b.kind,
                        b.line,
                        tuple(sorted({ln for ln, _ in inside})),
                        tuple(uses),
                        tuple(carried),
                        outer,
                    )
                )
            updates = sorted({ln for ln, upd in inside if upd})
            if b.kind is BlockKind.FOR and updates and uses:
                state.append(LoopState(n, b.id, tuple(updates), tuple(uses)))
    span = Span(body_first, _last(node))
    return FunctionSource(
        name=name,
        qualname=qualname,
        filename=filename,
        span=span,
        is_lambda=isinstance(node, ast.Lambda),
        is_trace_helper=trace_helper,
        decorators=decorators,
        params=params,
        kwonly_params=kwonly,
        mutable_params=mutable,
        blocks=tuple(p.blocks),
        loops=tuple(p.loops),
        ifs=tuple(p.ifs),
        scope_candidates=tuple(cands),
        allocations=tuple(p.allocs),
        annotations=tuple(p.annotations),
        loop_state=tuple(state),
        returns=tuple(p.returns),
        returns_value=p.returns_value,
        returned_names=tuple(dict.fromkeys(p.returned_names)),
        calls=tuple(CallSite(ln, c, None) for ln, c in p.calls),
        nested=tuple(p.nested),
        comprehension_lines=tuple(p.comprehensions),
        global_names=tuple(p.globals),
        nonlocal_names=tuple(p.nonlocals),
        while_lines=tuple(p.whiles),
        is_lines=tuple(p.is_lines),
        direct_allocation_lines=tuple(p.direct_alloc),
    )


# ----------------------------------------------------------------------------------------------------------------
# entry points
# ----------------------------------------------------------------------------------------------------------------


def _resolve(callee: str, env: Mapping[str, object]) -> object | None:
    parts = callee.split(".")
    obj = env.get(parts[0], getattr(builtins, parts[0], None))
    for attr in parts[1:]:
        if obj is None:
            return None
        if isinstance(obj, (types.ModuleType, type)):
            obj = _attr(obj, attr)
        else:
            return None  # attribute of a value (a method of an argument, ...): unknown until run time
    return obj


def _env_of(func: types.FunctionType) -> dict[str, object]:
    env = dict(func.__globals__)
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or (), strict=False):
        try:
            env[name] = cell.cell_contents
        except ValueError:  # an empty cell (not assigned yet)
            pass
    return env


_LIBRARY_DIRS = tuple(
    {
        p
        for p in (
            sys.prefix,
            sys.base_prefix,
            sysconfig.get_paths().get("purelib", ""),
            sysconfig.get_paths().get("stdlib", ""),
        )
        if p
    }
)


def _is_library(func: types.FunctionType) -> bool:
    """NKI API functions (the interpreter, a real neuronxcc) and installed libraries: not user helpers."""
    mod = getattr(func, "__module__", "") or ""
    if mod.split(".")[0] in ("nki_kernels", "neuronxcc", "numpy", "nki"):
        return True
    return func.__code__.co_filename.startswith(_LIBRARY_DIRS)


def analyze_kernel(kernel: object, *, follow_helpers: bool = True, max_depth: int = 4) -> KernelSource:
    """Describe ``kernel`` (a function, an ``@nki.jit`` kernel, a ``functools.wraps`` wrapper) and, with
    ``follow_helpers``, the Python functions it calls that resolve through its globals and closure, up to
    ``max_depth`` calls deep.  Never raises for user code: an unreadable source gives ``available=False``."""
    func, trace = _unwrap(kernel)
    if func is None:
        return KernelSource(False, f"{type(kernel).__name__} is not a Python function (no source to read)", None)
    node, reason = _lookup(func.__code__, func.__globals__)
    if node is None:
        return KernelSource(False, reason, None)
    desc = _describe(node, func.__code__.co_filename, func.__qualname__, True, trace)
    helpers: dict[str, FunctionSource] = dict(_nested(node, func.__code__.co_filename, func.__qualname__))
    unresolved: list[CallSite] = []
    resolved_calls: list[CallSite] = []
    if follow_helpers:
        todo: list[tuple[FunctionSource, types.FunctionType, int]] = [(desc, func, 0)]
        while todo:
            fs, fn, depth = todo.pop()
            env = _env_of(fn)
            for call in fs.calls:
                target = _resolve(call.callee, env)
                inner, inner_trace = _unwrap(target) if target is not None else (None, False)
                if inner is None or _is_library(inner) or inner is fn:
                    if (
                        target is None
                        and call.callee.split(".")[0] not in env
                        and not hasattr(builtins, call.callee.split(".")[0])
                    ):
                        unresolved.append(call)
                    continue
                if fs is desc:
                    resolved_calls.append(CallSite(call.line, call.callee, inner.__qualname__))
                if inner.__qualname__ in helpers or depth >= max_depth:
                    continue
                hnode, _ = _lookup(inner.__code__, inner.__globals__)
                if hnode is None:
                    continue
                hdesc = _describe(hnode, inner.__code__.co_filename, inner.__qualname__, inner_trace, inner_trace)
                helpers[inner.__qualname__] = hdesc
                todo.append((hdesc, inner, depth + 1))
    if resolved_calls:
        known = {(c.line, c.callee): c for c in resolved_calls}
        desc = _replace_calls(desc, tuple(known.get((c.line, c.callee), c) for c in desc.calls))
    return KernelSource(True, None, desc, helpers, tuple(unresolved))


def _nested(node: ast.AST, filename: str, qualname: str) -> Iterator[tuple[str, FunctionSource]]:
    """Descriptions of the functions defined inside ``node`` (plain helpers: their ``range`` is unrolled)."""
    for child in ast.walk(node):
        if child is node or not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        q = f"{qualname}.<locals>.{child.name}"
        trace = any(_is_trace_decorator(d) for d in child.decorator_list)
        yield q, _describe(child, filename, q, trace, trace)


def _replace_calls(fs: FunctionSource, calls: tuple[CallSite, ...]) -> FunctionSource:
    return dataclasses.replace(fs, calls=calls)


def analyze_source(
    source: str, *, filename: str = "<string>", first_line: int = 1, name: str | None = None, kernel_scope: bool = True
) -> KernelSource:
    """Describe the function ``name`` (default: the first one) defined in ``source`` as if it started on line
    ``first_line`` of ``filename``.  ``kernel_scope=False`` describes it as a plain helper (``range`` unrolled).
    Helpers are not followed (there are no live objects to resolve them)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return KernelSource(False, f"{filename}: does not parse ({e.msg}, line {e.lineno})", None)
    if first_line != 1:
        ast.increment_lineno(tree, first_line - 1)
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if name is not None:
        fns = [n for n in fns if n.name == name]
    if not fns:
        lams = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        if not lams or name is not None:
            return KernelSource(False, f"{filename}: no function {name or ''} in the source".replace("  ", " "), None)
        return KernelSource(True, None, _describe(lams[0], filename, "<lambda>", kernel_scope, False))
    node = fns[0]
    return KernelSource(True, None, _describe(node, filename, node.name, kernel_scope, False))


_CODE_CACHE: dict[tuple[types.CodeType, bool], FunctionSource | None] = {}


def analyze_code(
    code: types.CodeType, *, kernel_scope: bool = False, module_globals: Mapping | None = None
) -> FunctionSource | None:
    """The description of the function whose code object is ``code`` (e.g. ``frame.f_code`` of a helper met at
    run time), or None without source.  Cached per code object; ``kernel_scope`` as in :func:`analyze_source`."""
    key = (code, kernel_scope)
    if key in _CODE_CACHE:
        return _CODE_CACHE[key]
    node, _ = _lookup(code, module_globals)
    fs = None
    if node is not None:
        fs = _describe(
            node,
            code.co_filename,
            code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
            kernel_scope,
            False,
        )
    _CODE_CACHE[key] = fs
    return fs


def source_of(func: object) -> tuple[str, int] | None:
    """(file, first line) of the Python function behind ``func``, or None."""
    f, _ = _unwrap(func)
    if f is None:
        return None
    try:
        return inspect.getsourcefile(f) or f.__code__.co_filename, f.__code__.co_firstlineno
    except TypeError:
        return None


# ---- what a running frame does with a truth value (both front ends: a loop-index predicate in NKI 0.1, a
# tensor in NKI 0.7, tested by `if`) ----------------------------------------------------------------------
_INSTR_CACHE: dict[types.CodeType, dict[int, tuple[str, int | None]]] = {}


def _instruction(frame: types.FrameType) -> tuple[str, int | None]:
    """(opname, line) of the instruction ``frame`` is executing."""
    code = frame.f_code
    table = _INSTR_CACHE.get(code)
    if table is None:
        table = {}
        instrs = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
        for n, ins in enumerate(instrs):
            pos = getattr(ins, "positions", None)
            line = pos.lineno if pos is not None and pos.lineno is not None else ins.starts_line
            op, k = ins.opname, n
            if op == "TO_BOOL" and n + 1 < len(instrs):
                k = n + 1  # Python 3.13+: __bool__ runs in TO_BOOL; what follows says what the value is for
                op = instrs[k].opname
            if op.startswith("POP_JUMP") and k >= 1 and instrs[n - 1].opname == "COPY":
                op = "JUMP_IF_" + op  # 3.12+: `a and b` in a value is COPY + POP_JUMP_IF_* (3.11: JUMP_IF_*_OR_POP)
            table[ins.offset] = (op, line)
        _INSTR_CACHE[code] = table
    return table.get(frame.f_lasti, ("", frame.f_lineno))


def control_flow_site(frame: types.FrameType) -> str:
    """What the user's ``frame`` is doing with a truth value: ``"if"`` (the test of an ``if``/``elif``
    statement), ``"while"`` (the test of a ``while``), ``"jump"`` (another conditional jump: ``x if p else y``,
    ``assert``, a comprehension filter), ``"boolop"`` (``and``/``or`` in a value) or ``"call"`` (``bool()``,
    ``min``/``max``, ``not``, ...)."""
    op, line = _instruction(frame)
    if op.startswith("POP_JUMP"):
        fs = analyze_code(frame.f_code, module_globals=frame.f_globals)
        if fs is None:
            return "if"  # no source: cannot tell, accept
        at = line or frame.f_lineno
        if at in fs.while_lines:
            return "while"
        if fs.if_test_at(at) is not None:
            return "if"
        return "jump"
    if op.startswith("JUMP_IF_"):
        return "boolop"
    return "call"


class KernelGlobals(dict):
    """The globals a kernel function runs with: its module's, seen through, plus the front end's ``range``
    (NKI 0.1: a symbolic ``sequential_range``; NKI 0.7: a loop that may run as a program, sim/loopproof.py).
    Lookups of other names fall through to the module (so later changes to module globals are seen)."""

    __slots__ = ("module",)

    def __init__(self, module: dict, range_fn: Callable[..., object]) -> None:
        super().__init__()
        self.module = module
        dict.__setitem__(self, "range", range_fn)
        dict.__setitem__(self, "__builtins__", module.get("__builtins__", __builtins__))
        if "__name__" in module:
            dict.__setitem__(self, "__name__", module["__name__"])

    def __missing__(self, name: str) -> object:
        return self.module[name]


@functools.lru_cache(maxsize=1024)
def _stores_globals(code: types.CodeType) -> bool:
    return any(i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for i in dis.get_instructions(code))


def with_range(func: types.FunctionType, range_fn: Callable[..., object]) -> types.FunctionType:
    """``func`` re-bound to globals where ``range`` is ``range_fn``, or ``func`` itself when that is not possible or
    not needed (a module that rebinds ``range``, a function that does not use it or declares ``global`` names)."""
    code = func.__code__
    g = func.__globals__
    if isinstance(g, KernelGlobals) or "range" in g or "range" not in code.co_names or _stores_globals(code):
        return func
    fn = types.FunctionType(code, KernelGlobals(g, range_fn), func.__name__, func.__defaults__, func.__closure__)
    fn.__kwdefaults__ = func.__kwdefaults__
    fn.__dict__.update(func.__dict__)
    fn.__qualname__ = func.__qualname__
    fn.__module__ = func.__module__
    fn.__doc__ = func.__doc__
    return fn
