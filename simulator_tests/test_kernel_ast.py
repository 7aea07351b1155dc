"""nki_kernels.sim.kernel_ast: static facts about kernel source (docs/nki-0.1-rules.md §10).

Mostly source strings (``analyze_source``); the last group runs ``analyze_kernel`` / ``analyze_code`` on live
functions of this module (helpers, closures, jit wrappers, exec'd code without source)."""

from __future__ import annotations

import functools
import sys
import textwrap
import types

import pytest

from nki_kernels.sim import nki, nl
from nki_kernels.sim.kernel_ast import (
    BlockKind,
    FunctionSource,
    KernelSource,
    analyze_code,
    analyze_kernel,
    analyze_source,
)


def fn(src: str, *, first_line: int = 1, kernel_scope: bool = True, name: str | None = None) -> FunctionSource:
    ks = analyze_source(textwrap.dedent(src), first_line=first_line, kernel_scope=kernel_scope, name=name)
    assert ks.available, ks.reason
    assert ks.kernel is not None
    return ks.kernel


def cand(f: FunctionSource, name: str, kind: BlockKind | None = None):
    hits = [c for c in f.scope_candidates if c.name == name and (kind is None or c.block_kind is kind)]
    assert hits, f"no scope candidate {name} in {[c.name for c in f.scope_candidates]}"
    return hits[0]


# ---- scopes ---------------------------------------------------------------------------------------------------
ERRORS_PAGE_SCOPE = """
def k(a, b, c):
    for i in range(4):
        if i < 2:
            tmp = nl.load(a)
        else:
            tmp = nl.load(b)
        nl.store(c, tmp)
"""


def test_if_else_binding_used_after_the_block_is_a_candidate_with_both_lines() -> None:
    f = fn(ERRORS_PAGE_SCOPE)
    in_if = cand(f, "tmp", BlockKind.IF)
    in_else = cand(f, "tmp", BlockKind.ELSE)
    assert in_if.bind_lines == (5,) and in_else.bind_lines == (7,)
    assert in_if.use_lines == (8,) and in_else.use_lines == (8,)
    assert in_if.block_line == 4 and not in_if.rebinds_outer
    assert f.candidates_at(8) and not f.candidates_at(5)


def test_rebinding_in_a_loop_is_carried_and_used_after() -> None:
    f = fn("""
        def k(a, out):
            acc = nl.zeros((128, 64), dtype=nl.float32)
            for i in nl.sequential_range(4):
                acc = nl.add(acc, nl.load(a[i]))
            nl.store(out, acc)
        """)
    c = cand(f, "acc", BlockKind.FOR)
    assert c.bind_lines == (5,) and c.carried_lines == (5,) and c.use_lines == (6,)
    assert c.rebinds_outer
    assert [(s.name, s.update_lines, s.use_lines) for s in f.loop_state] == [("acc", (5,), (6,))]


def test_in_place_updates_and_uses_inside_the_block_are_not_candidates() -> None:
    f = fn("""
        def k(a, out):
            acc = nl.zeros((128, 64), dtype=nl.float32)
            for i in nl.affine_range(4):
                t = nl.load(a[i])
                acc[...] = nl.add(acc, t)
                nl.store(out[i], t)
            nl.store(out[0], acc)
        """)
    assert [c.name for c in f.scope_candidates if c.name in ("t", "acc")] == []


def test_python_state_updated_in_a_loop_and_read_after() -> None:
    f = fn("""
        def k(a, out):
            count = 0
            for i in nl.affine_range(4):
                count += 1
            nl.store(out[count - 1], nl.load(a))
        """)
    assert [(s.name, s.update_lines, s.use_lines) for s in f.loop_state] == [("count", (5,), (6,))]


def test_nested_blocks_report_the_innermost_scope_and_parents() -> None:
    f = fn("""
        def k(a, out):
            for i in nl.affine_range(2):
                for j in nl.affine_range(2):
                    t = nl.load(a[i, j])
                nl.store(out[i], t)
        """)
    c = cand(f, "t")
    assert c.block_kind is BlockKind.FOR and c.block_line == 4 and c.use_lines == (6,)
    outer, inner = f.blocks_at(5)
    assert (outer.line, inner.line) == (3, 4) and inner.parent == outer.id
    assert f.blocks_at(2) == ()


def test_with_and_while_blocks_and_try() -> None:
    f = fn("""
        def k(a, out):
            with ctx() as c:
                t = nl.load(a)
            n = 0
            while n < 3:
                n = n + 1
            try:
                u = nl.load(a)
            except ValueError as e:
                u = None
            nl.store(out, t)
            return u, e
        """)
    assert cand(f, "t").block_kind is BlockKind.WITH
    assert f.while_lines == (6,)
    assert cand(f, "u").block_kind is BlockKind.TRY


# ---- loops ----------------------------------------------------------------------------------------------------
LOOPS = """
def k(a, xs):
    for i in nl.affine_range(2):
        pass
    for i in nl.sequential_range(2):
        pass
    for i in nl.static_range(2):
        pass
    for i in range(2):
        pass
    for i in _range(2):
        pass
    for x in xs:
        pass
    for p, q in zip(xs, xs):
        pass
"""


def test_loop_iterators_in_the_kernel_function() -> None:
    f = fn(LOOPS)
    got = [(lp.line, lp.iterator, lp.symbolic) for lp in f.loops]
    assert got == [
        (3, "affine", True),
        (5, "sequential", True),
        (7, "static", False),
        (9, "range", True),
        (11, "other", None),
        (13, "iterable", False),
        (15, "other", None),
    ]
    assert f.loops[-1].targets == ("p", "q")
    at9 = f.loop_at(9)
    assert at9 is not None and at9.call == "range"
    assert f.loop_at(4) is None


def test_range_in_a_plain_helper_is_unrolled() -> None:
    f = fn(LOOPS, kernel_scope=False)
    assert [lp.symbolic for lp in f.loops if lp.iterator == "range"] == [False]
    assert [lp.symbolic for lp in f.loops if lp.iterator == "affine"] == [True]


def test_trace_decorated_helper_keeps_range_symbolic() -> None:
    f = fn(
        """
        @nki.jit(mode='trace')
        def helper(out, tiles):
            for i in range(len(tiles)):
                nl.store(out[i], tiles[i])
        """,
        kernel_scope=False,
    )
    assert f.is_trace_helper and f.decorators == ("nki.jit(mode='trace')",)
    assert f.loops[0].symbolic is True
    g = fn("@nki.trace\ndef h(x):\n    for i in range(2):\n        pass\n", kernel_scope=False)
    assert g.is_trace_helper and g.loops[0].symbolic is True


# ---- ifs ------------------------------------------------------------------------------------------------------
def test_if_elif_else_sites() -> None:
    f = fn("""
        def k(a, i, n):
            if (i < n
                    and n > 0):
                x = 1
            elif i == n:
                x = 2
            else:
                x = 3
            return x
        """)
    first = f.if_test_at(4)
    assert first is not None and first.line == 3 and first.test.first == 3 and first.test.last == 4
    assert first.test_boolop and not first.is_elif
    second = f.if_test_at(6)
    assert second is not None and second.is_elif and not second.test_boolop
    assert second.else_block is not None and f.blocks[second.else_block].kind is BlockKind.ELSE


# ---- shared_hbm, annotations, parameters, returns ------------------------------------------------------------
def test_hbm_allocation_sites_and_their_context() -> None:
    f = fn("""
        def k(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            for i in range(2):
                tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            if flag:
                lse = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
            scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
            sb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            return out
        """)
    sites = [(s.line, s.buffer, s.top_level, [f.blocks[b].kind for b in s.blocks]) for s in f.allocations]
    assert sites == [
        (3, "shared_hbm", True, []),
        (5, "shared_hbm", False, [BlockKind.FOR]),
        (7, "shared_hbm", False, [BlockKind.IF]),
        (8, "hbm", True, []),
    ]


def test_annotated_assignments_give_the_annotated_shape() -> None:
    f = fn("""
        def k(a):
            data: nt.tensor[128, 512] = nl.zeros((nl.par_dim(128), 128), dtype=nl.float32)
            other: tensor[[8, N], nl.float32] = nl.load(a)
            count: int = 0
        """)
    assert [(x.line, x.target, x.shape) for x in f.annotations] == [
        (3, "data", (128, 512)),
        (4, "other", (8, "N")),
        (5, "count", None),
    ]


def test_parameters_returns_and_mutable_tensors() -> None:
    f = fn("""
        def k(in_tensor: nt.mutable_tensor, b, *, flag=True):
            out = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.shared_hbm)
            if flag is None:
                return out
            return out, b
        """)
    assert f.params == ("in_tensor", "b") and f.kwonly_params == ("flag",)
    assert f.mutable_params == ("in_tensor",)
    assert f.returns == (5, 6) and f.returns_value and f.returned_names == ("out", "b")
    assert f.is_lines == (4,)
    g = fn("def k(a):\n    t = nl.exp(nl.load(a))\n")
    assert g.returns == () and not g.returns_value


def test_direct_allocation_calls_are_listed() -> None:
    f = fn("""
        def k(a):
            t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
            p = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.psum.alloc(f))
            return t
        """)
    assert f.direct_allocation_lines == (3, 4)


# ---- what real kernels contain --------------------------------------------------------------------------------
def test_nested_functions_lambdas_and_comprehensions_do_not_leak_bindings() -> None:
    f = fn("""
        def k(a, out):
            for i in nl.affine_range(2):
                def body(j):
                    inner = nl.load(a[j])
                    return inner
                g = lambda x: x + 1
                squares = [v * v for v in range(3)]
            nl.store(out, body(0))
            return inner, v, squares
        """)
    names = {c.name for c in f.scope_candidates}
    assert "body" in names and "squares" in names
    assert "inner" not in names and "v" not in names
    assert f.nested == ("body", "<lambda>:7") and f.comprehension_lines == (8,)


def test_global_and_nonlocal_names_are_not_scope_candidates() -> None:
    f = fn("""
        def k(a, out):
            global counter
            for i in nl.affine_range(2):
                counter = nl.load(a)
            nl.store(out, counter)
        """)
    assert f.global_names == ("counter",) and not f.scope_candidates


def test_lines_are_absolute_with_a_first_line_offset() -> None:
    f = fn(ERRORS_PAGE_SCOPE, first_line=100)
    assert cand(f, "tmp", BlockKind.IF).use_lines == (107,)
    assert f.span.first == 101


def test_a_lambda_alone_is_described_and_bad_source_is_unavailable() -> None:
    lam = analyze_source("k = lambda a: nl.exp(nl.load(a))\n")
    assert lam.available and lam.kernel is not None and lam.kernel.is_lambda and lam.kernel.params == ("a",)
    broken = analyze_source("def k(a:\n    pass\n")
    assert not broken.available and "does not parse" in (broken.reason or "")
    missing = analyze_source("x = 1\n", name="k")
    assert not missing.available


# ---- live objects ---------------------------------------------------------------------------------------------
def _plain_helper(out, tiles):
    for i in range(len(tiles)):
        nl.store(out[i], tiles[i])


@nki.jit(mode="trace")
def _trace_helper(out, tiles):
    for i in range(len(tiles)):
        nl.store(out[i], tiles[i])


def _make_closure_kernel():
    def closed_helper(x):
        return nl.exp(x)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, closed_helper(nl.load(a)))
        return out

    return kernel


@nki.jit
def _live_kernel(a):
    out = nl.ndarray((2, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    _plain_helper(out, [nl.load(a[0]), nl.load(a[1])])
    _trace_helper(out, [nl.load(a[0]), nl.load(a[1])])
    return out


def test_analyze_kernel_follows_plain_and_trace_helpers() -> None:
    ks = analyze_kernel(_live_kernel)
    assert ks.available and ks.kernel is not None and ks.kernel.name == "_live_kernel"
    assert ks.kernel.decorators == ("nki.jit",)
    plain = ks.helpers["_plain_helper"]
    trace = ks.helpers["_trace_helper"]
    assert plain.loops[0].symbolic is False and not plain.is_trace_helper
    assert trace.loops[0].symbolic is True and trace.is_trace_helper
    resolved = {c.callee: c.resolved for c in ks.kernel.calls}
    assert resolved["_plain_helper"] == "_plain_helper" and resolved["nl.load"] is None
    assert ks.function_at(__file__, plain.span.first + 1) is plain


def test_analyze_kernel_resolves_closures_and_wrappers() -> None:
    kernel = _make_closure_kernel()
    ks = analyze_kernel(kernel)
    assert "_make_closure_kernel.<locals>.closed_helper" in ks.helpers

    @functools.wraps(kernel)
    def wrapper(*args):
        return kernel(*args)

    for obj in (wrapper, nki.jit(kernel)):
        described = analyze_kernel(obj).kernel
        assert described is not None and described.qualname == kernel.__qualname__


def test_source_unavailable_is_reported_not_raised() -> None:
    namespace: dict = {}
    exec("def made_at_run_time(a):\n    return a\n", namespace)  # noqa: S102 -- code without a source file
    ks = analyze_kernel(namespace["made_at_run_time"])
    assert not ks.available and ks.kernel is None and "no source" in (ks.reason or "")
    builtin = analyze_kernel(len)
    assert not builtin.available and "not a Python function" in (builtin.reason or "")


def test_analyze_code_describes_a_running_frame_and_caches() -> None:
    def probe() -> types.CodeType:
        for _ in range(2):
            pass
        return sys._getframe().f_code

    code = probe()
    fs = analyze_code(code)
    assert fs is not None and fs.name == "probe" and fs.loops[0].symbolic is False
    assert analyze_code(code) is fs
    as_kernel = analyze_code(code, kernel_scope=True)
    assert (
        as_kernel is not None
        and as_kernel.loops[0].symbolic is True
        and analyze_code(code, kernel_scope=True) is as_kernel
    )


@pytest.mark.parametrize("case", ["err_local_variable_used_out_of_scope__rebind", "pm_kernel_range_is_sequential"])
def test_corpus_kernels_are_described(case: str) -> None:
    import importlib.util
    from pathlib import Path

    from nki_kernels.sim import install_neuronxcc_alias

    path = Path(__file__).parent / "data" / "nki01_rules" / f"{case}.py"
    with install_neuronxcc_alias(precision=None):
        spec = importlib.util.spec_from_file_location(f"ast_{case}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    bad: KernelSource = analyze_kernel(mod.bad)
    assert bad.available and bad.kernel is not None
    blame = next(i + 1 for i, ln in enumerate(path.read_text().splitlines()) if ln.endswith("# <- blame"))
    if case.startswith("err_local"):
        assert bad.kernel.candidates_at(blame)
    else:
        loop = next(lp for lp in bad.kernel.loops if lp.iterator == "range")
        assert loop.symbolic is True and blame in loop.body
