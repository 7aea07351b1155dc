"""Which unrolled loop bodies may run as loop programs (core/program.py), read from their source.

NKI 0.7 unrolls its loops, and NKI 0.1 its ``nl.static_range``: the loop index is a Python int and the body's
Python runs once per iteration (docs/nki-0.7-spec.md C1; NKI 0.1 ``static_range`` docstring, SDK 2.26).  A loop
program runs iterations 2..n-1 from the two it traced (the steps of every view from the difference between
them), which is the same as running them only where every iteration runs the same Python with the index moved.
The NKI 0.1 front end gets that for ``affine_range`` / ``sequential_range`` from its symbolic index
(nki01/symbolic.py); here the ``for`` statement's source has to show it:

* the body is statements the program can follow: calls, assignments to names or subscripts, nested ``for``
  loops over ranges that do not depend on the index, ``if`` tests that do not change between iterations;
* the loop index (and every name computed from it) appears only in affine arithmetic (``+``, ``-``, ``*`` by
  something the index does not reach) that ends in a subscript of a name (``a[i * 128 : (i + 1) * 128]``,
  ``a[nl.ds(i * 128, 128)]``), or in the assignment of another such name;
* no name the body binds is read before the body binds it (state carried from one iteration to the next) or by
  code after the loop, unless it holds a tile (the program renumbers held tiles and carries tiles itself).

Two facts need the values the kernel's names hold, so :func:`prove` returns a check that ``core/loops.py`` runs
after the two traced iterations: every subscripted name is a tensor (not a Python list), and every call is an NKI
instruction, allocation, loop or ``nl.ds``, a tensor's view method or a pure builtin (not the kernel's own helper,
which could keep Python state, nor ``nl.device_print``).  Anything else runs every iteration, as before;
``SimOptions(explain_loops=True)`` prints why.
"""

from __future__ import annotations

import ast
import builtins
import types
from collections.abc import Callable
from dataclasses import dataclass

from .core.errors import _SIM_DIR
from .kernel_ast import _dotted, _lookup

# builtins a body may call: their results depend only on their arguments (which the index does not reach)
_PURE_NAMES = ("float", "int", "bool", "min", "max", "abs", "len", "round", "range")
_PURE = tuple(getattr(builtins, n) for n in _PURE_NAMES)
_FRONT_ENDS = ("nki_kernels.sim.nki01.", "nki_kernels.sim.nki07.")
# nl.* functions a body may call besides the instructions (the adapters: a `core_op`, or an ALU op's `_nki_op`):
# allocations, loops, nl.ds and the launch's constants.  Not device_print (it prints from Python), shared_constant
# (it fills a tensor without an instruction), fori_loop / while_loop (they run a function of the kernel's).
_LANGUAGE = frozenset(
    (
        "ndarray",
        "ndarray_like",
        "zeros",
        "ones",
        "full",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "ds",
        "arange",
        "par_dim",
        "affine_range",
        "sequential_range",
        "static_range",
        "kernel_range",
        "program_id",
        "num_programs",
        "program_ndim",
    )
)
_MISSING = object()


@dataclass(frozen=True)
class Proof:
    """What the source of one ``for`` statement proved, and what the kernel's values must still show."""

    tensors: tuple[tuple[str, str], ...]  # (name, why not if it is no tensor): subscripted with the index, carried
    calls: tuple[tuple[str, int], ...]  # (dotted callee, line) of every call in the body
    ds: tuple[str, ...]  # callees taking the index as a start: nl.ds
    numbers: tuple[tuple[str, str], ...]  # (name, why not if it is a tensor): arguments of float(), int(), ...
    entry_calls: tuple[tuple[str, int], ...] = ()  # the calls whose function the body does not bind: checked at entry


# (code, line of the `for`) -> the proof, or why there is none (the source does not change during a run)
_CACHE: dict[tuple[types.CodeType, int], Proof | str] = {}


def prove(frame: types.FrameType, tensors: tuple[type, ...]) -> tuple[bool | str, Callable[[], str | None] | None]:
    """For the ``for`` statement in ``frame`` whose iterator call is running (it called nl.affine_range /
    sequential_range / static_range): (True, the check to run after the traced iterations), or (why not, None).
    ``tensors``: the front end's tensor classes (what a subscripted name must hold)."""
    code = frame.f_code
    if code.co_filename.startswith(_SIM_DIR):
        return "a loop inside the interpreter", None
    key = (code, frame.f_lineno)
    proof = _CACHE.get(key)
    if proof is None:
        proof = _CACHE[key] = _prove_at(code, frame.f_lineno, frame.f_globals)
    if isinstance(proof, str):
        return proof, None
    why = _check_at_entry(frame, proof, tensors)
    if why is not None:
        return why, None
    p = proof
    return True, lambda: _check(frame, p, tensors)


# (code, line) -> whether a `for` statement's iterator there is a call of `range`
_RANGE_SITES: dict[tuple[types.CodeType, int], bool] = {}


def range_loop_site(frame: types.FrameType) -> bool:
    """Is the ``range(...)`` called from ``frame`` the iterator of a ``for`` statement (not ``list(range(n))``)?"""
    key = (frame.f_code, frame.f_lineno)
    hit = _RANGE_SITES.get(key)
    if hit is None:
        fn, _ = _lookup(frame.f_code, frame.f_globals)
        line = frame.f_lineno
        hit = _RANGE_SITES[key] = fn is not None and any(
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range"
            and node.iter.lineno <= line <= (node.iter.end_lineno or node.iter.lineno)
            for node in ast.walk(fn)
        )
    return hit


def _prove_at(code: types.CodeType, line: int, module_globals: dict) -> Proof | str:
    fn, why = _lookup(code, module_globals)
    if fn is None:
        return f"the loop's source is needed to prove its iterations alike ({why})"
    loops = [
        node
        for node in ast.walk(fn)
        if isinstance(node, ast.For)
        and isinstance(node.iter, ast.Call)
        and node.iter.lineno <= line <= (node.iter.end_lineno or node.iter.lineno)
    ]
    if len(loops) != 1:
        return "the loop's `for` statement was not found in its source"
    try:
        return _Prover(fn, loops[0]).run()
    except (AttributeError, KeyError, TypeError, ValueError) as e:  # source the proof does not expect: no program
        return f"the proof stopped at the loop's source ({type(e).__name__}: {e})"


class _Prover:
    def __init__(self, fn: ast.AST, loop: ast.For) -> None:
        self.fn = fn
        self.loop = loop
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(fn):
            for ch in ast.iter_child_nodes(node):
                self.parents[ch] = node
        self.bound: dict[str, tuple[int, int]] = {}  # name the body binds -> where it first does (statement end)
        self.targets: set[str] = set()  # loop variables (this loop's and its inner loops')
        self.tensors: dict[str, str] = {}  # name -> why the loop runs every iteration if it holds no tensor
        self.ds: set[str] = set()
        self.numbers: dict[str, str] = {}  # name -> why the loop runs every iteration if it holds a tensor

    def run(self) -> Proof | str:
        loop = self.loop
        if not isinstance(loop.target, ast.Name):
            return f"a loop target that is not a name (line {loop.lineno})"
        if loop.orelse:
            return f"a `for ... else` (line {loop.lineno})"
        self.targets.add(loop.target.id)
        why = self._statements(loop.body)
        if why is not None:
            return why
        nodes = [n for stmt in loop.body for n in ast.walk(stmt)]
        for n in nodes:
            if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) or isinstance(
                n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
            ):
                return f"a {type(n).__name__} in the body (line {n.lineno}): code the proof does not follow"
        # the names the index reaches: the loop variables and every name assigned an affine expression of one
        # (`row = (2 * i + j) * P`; a tile loaded from a subscript with the index is not an index)
        varying = set(self.targets)
        grew = True
        while grew:
            grew = False
            for n in nodes:
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in varying:
                    use = self._affine_use(n, varying)
                    if isinstance(use, ast.stmt):
                        for t in use.targets if isinstance(use, ast.Assign) else [use.target]:  # type: ignore[attr-defined]
                            for x in ast.walk(t):
                                if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store) and x.id not in varying:
                                    varying.add(x.id)
                                    grew = True
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in varying:
                use = self._affine_use(n, varying)
                if isinstance(use, str):
                    return use
        calls = []
        for n in nodes:
            if isinstance(n, ast.Call):
                callee = _dotted(n.func)
                if callee is None or isinstance(n.func, ast.Call):
                    return f"a call of a computed function (line {n.lineno})"
                calls.append((callee, n.lineno))
                if callee in _PURE_NAMES and callee not in ("len", "range"):
                    # float(x) of a tile would read its values (each iteration's): only numbers from before the body
                    for a in n.args:
                        if not _free(a, varying | set(self.bound)):
                            return f"{callee}() of a value the body computes (line {n.lineno})"
                        if isinstance(a, ast.Name):
                            self.numbers.setdefault(a.id, f"{callee}({a.id}) of a tensor (line {n.lineno})")
        # a name read before the body binds it carries the previous iteration's value; one read after the loop sees
        # what the traced iteration left: tiles only (the program carries and renumbers them)
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.bound:
                if (n.lineno, n.col_offset) < self.bound[n.id] and n.id not in self.targets:
                    carried = f"the body carries `{n.id}` from one iteration to the next (line {n.lineno})"
                    if n.id in varying:
                        return carried
                    self.tensors.setdefault(n.id, carried + " and it is not a tile")
        end = (loop.end_lineno or loop.lineno, loop.end_col_offset or 0)
        names = set(self.bound) | {loop.target.id}
        for n in ast.walk(self.fn):
            if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names):
                continue
            if (n.lineno, n.col_offset) <= end and not self._before_in_enclosing_loop(n) and not self._deferred(n):
                continue
            if self._rebound_before(n):
                continue
            after = f"`{n.id}` is read after the loop (line {n.lineno}): it would hold the traced iteration's value"
            if n.id in varying:
                return after
            self.tensors.setdefault(n.id, after)
        body_bound = set(self.bound) | self.targets
        entry = tuple(c for c in calls if c[0].split(".", 1)[0] not in body_bound)
        return Proof(
            tuple(sorted(self.tensors.items())),
            tuple(calls),
            tuple(sorted(self.ds)),
            tuple(sorted(self.numbers.items())),
            entry,
        )

    def _statements(self, body: list[ast.stmt]) -> str | None:
        for s in body:
            end = (s.end_lineno or s.lineno, s.end_col_offset or 0)
            if isinstance(s, (ast.Expr, ast.Pass)):
                continue
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    for x in ast.walk(t):
                        if isinstance(x, (ast.Attribute, ast.Starred)) and isinstance(x.ctx, ast.Store):
                            return f"an assignment to an attribute or a starred name (line {s.lineno})"
                        if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                            self.bound.setdefault(x.id, end)
                if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                    self.bound[s.target.id] = (s.lineno, s.col_offset)  # `x += ...` reads x first
                continue
            if isinstance(s, ast.For):
                if not isinstance(s.target, ast.Name) or s.orelse or not isinstance(s.iter, ast.Call):
                    return f"a nested loop that is not `for name in range-call` (line {s.lineno})"
                self.targets.add(s.target.id)
                self.bound.setdefault(s.target.id, (s.lineno, s.col_offset))
                why = self._statements(s.body)
                if why is not None:
                    return why
                continue
            if isinstance(s, ast.If):
                if not _free(s.test, set(self.targets) | set(self.bound)):
                    return f"an `if` whose test may change between iterations (line {s.lineno})"
                why = self._statements(s.body) or self._statements(s.orelse)
                if why is not None:
                    return why
                continue
            return f"a `{type(s).__name__.lower()}` statement in the body (line {s.lineno})"
        return None

    def _affine_use(self, n: ast.Name, varying: set[str]) -> str | ast.stmt | None:
        """How the index-derived name ``n`` is used: None in an affine subscript of a name, the assignment statement
        whose value is an affine expression of it, else why neither."""
        cur: ast.AST = n
        p = self.parents.get(cur)
        while True:
            if isinstance(p, ast.BinOp):
                other = p.right if cur is p.left else p.left
                if isinstance(p.op, (ast.Add, ast.Sub)) or (isinstance(p.op, ast.Mult) and _free(other, varying)):
                    cur, p = p, self.parents.get(p)
                    continue
                return f"the loop index in `{ast.unparse(p)}` (line {p.lineno}): not affine"
            if isinstance(p, ast.UnaryOp) and isinstance(p.op, (ast.USub, ast.UAdd)):
                cur, p = p, self.parents.get(p)
                continue
            break
        if isinstance(p, ast.Slice) and cur is not p.step:
            cur, p = p, self.parents.get(p)
        elif isinstance(p, ast.Call) and cur in p.args[:1] and (_dotted(p.func) or "").rsplit(".", 1)[-1] == "ds":
            self.ds.add(_dotted(p.func) or "")
            cur, p = p, self.parents.get(p)
        if isinstance(p, ast.Tuple):
            cur, p = p, self.parents.get(p)
        if isinstance(p, ast.Subscript) and cur is p.slice:
            if not isinstance(p.value, ast.Name):
                return f"a subscript with the loop index of an expression (line {p.lineno})"
            self.tensors.setdefault(
                p.value.id, f"`{p.value.id}` is subscripted with the loop index (line {p.lineno}) and is not a tensor"
            )
            return None
        if isinstance(p, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and cur is p.value:
            return p
        return f"the loop index used other than in a tensor subscript (line {n.lineno})"

    def _before_in_enclosing_loop(self, n: ast.Name) -> bool:
        """Is ``n`` (before the loop in the source) inside a loop that encloses this one (it runs after it too)?"""
        p = self.parents.get(self.loop)
        while p is not None and p is not self.fn:
            if isinstance(p, (ast.For, ast.While)) and any(x is n for x in ast.walk(p)):
                return True
            p = self.parents.get(p)
        return False

    def _deferred(self, n: ast.Name) -> bool:
        """Is ``n`` in a function or lambda defined in the kernel (outside the loop), which may run after it?"""
        for p in _ancestors(n, self.parents):
            if p is self.fn or p is self.loop:
                return False
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return True
        return False

    def _rebound_before(self, n: ast.Name) -> bool:
        """Does a later statement bind ``n.id`` again before ``n`` reads it: a later ``for`` with that target whose
        body holds ``n``, or an assignment beside the loop (in its statement list) between the two?"""
        for p in _ancestors(n, self.parents):
            if p is self.loop:
                return False
            if isinstance(p, ast.For) and isinstance(p.target, ast.Name) and p.target.id == n.id:
                return any(x is n for s in p.body for x in ast.walk(s))
        parent = self.parents.get(self.loop)
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(parent, field, None)
            if not isinstance(stmts, list) or self.loop not in stmts:
                continue
            for s in stmts[stmts.index(self.loop) + 1 :]:
                if any(x is n for x in ast.walk(s)):
                    return False
                if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == n.id for t in s.targets):
                    return True
        return False


def _ancestors(n: ast.AST, parents: dict[ast.AST, ast.AST]):
    p = parents.get(n)
    while p is not None:
        yield p
        p = parents.get(p)


def _free(e: ast.AST, names: set[str]) -> bool:
    """Does ``e`` avoid ``names`` and calls (its value is the same in every iteration)?"""
    return not any(
        (isinstance(x, ast.Name) and x.id in names) or isinstance(x, (ast.Call, ast.NamedExpr, ast.Lambda))
        for x in ast.walk(e)
    )


def _check(frame: types.FrameType, proof: Proof, tensors: tuple[type, ...]) -> str | None:
    """After the traced iterations: why the kernel's values do not let the program run, or None."""
    loc = frame.f_locals
    try:
        value = _values(loc, frame.f_globals, frame.f_builtins)
        late = tuple(c for c in proof.calls if c not in proof.entry_calls)  # (the others were checked at entry)
        return _check_names(value, proof, tensors) or _check_calls(value, late, proof.ds, tensors)
    finally:
        _drop_snapshot(loc)


def _check_at_entry(frame: types.FrameType, proof: Proof, tensors: tuple[type, ...]) -> str | None:
    """Before the loop runs: the calls whose function the body does not bind (``nl.exp``, a helper of the kernel's)
    resolve now, so a loop calling a helper runs every iteration without tracing two first."""
    calls = proof.entry_calls
    if not calls:
        return None
    code = frame.f_code
    local = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    loc = frame.f_locals if any(c.split(".", 1)[0] in local for c, _ in calls) else {}
    try:
        return _check_calls(_values(loc, frame.f_globals, frame.f_builtins), calls, proof.ds, tensors)
    finally:
        _drop_snapshot(loc)


def _drop_snapshot(loc: object) -> None:
    if loc.__class__ is dict:
        # up to Python 3.12 f_locals is a snapshot the frame keeps until the next read: it would hold the tiles it saw
        # alive in the iterations after it (their peak SBUF would differ from running every iteration)
        loc.clear()


def _values(loc: dict, glob: dict, blt: dict) -> Callable[[str], object]:
    def value(name: str) -> object:
        if name in loc:
            return loc[name]
        try:
            return glob[name]  # (a kernel's globals may see through to its module's: kernel_ast.KernelGlobals)
        except KeyError:
            return blt.get(name, _MISSING)

    return value


def _check_names(value: Callable[[str], object], proof: Proof, tensors: tuple[type, ...]) -> str | None:
    for name, why in proof.tensors:
        if not isinstance(value(name), tensors):
            return why
    for name, why in proof.numbers:
        if isinstance(value(name), tensors):
            return why
    return None


def _check_calls(
    value: Callable[[str], object], calls: tuple[tuple[str, int], ...], ds: tuple[str, ...], tensors: tuple[type, ...]
) -> str | None:
    for callee, line in calls:
        root, *attrs = callee.split(".")
        obj = value(root)
        if isinstance(obj, tensors) and len(attrs) == 1:
            continue  # a view method of a tile (t.reshape(...), t.ap(...))
        for a in attrs:
            obj = getattr(obj, a, _MISSING)
        if any(obj is f for f in _PURE):
            continue
        module = getattr(obj, "__module__", None) or ""
        name = getattr(obj, "__name__", "")
        nki = module.startswith(_FRONT_ENDS) and (
            hasattr(obj, "core_op") or hasattr(obj, "_nki_op") or (module.endswith(".language") and name in _LANGUAGE)
        )
        if not nki:
            return f"the body calls {callee} (line {line}): Python the program would not run per iteration"
        if callee in ds and name != "ds":
            return f"{callee} (line {line}) takes the loop index and is not nl.ds"
    return None
