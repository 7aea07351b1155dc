"""NKI 0.7 loop programs (sim/loopproof.py): a loop whose source proves every iteration runs the same Python
with the index moved runs as a program; every kernel here runs both ways and must give the same bits, the same
trace event for event, the same warnings (or the same error); the loops it cannot prove say why."""

from __future__ import annotations

import numpy as np
import pytest

from nki_kernels.sim import SimOptions
from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07.kernel import jit, trace
from sim_testing import same_with_loop_programs

P = 128
SCALE = 1.5
USE_BIAS = True


def _helper(t):
    return t


# ---- bodies it proves ---------------------------------------------------------------------------------------------
@jit
def columns(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[1] // 4):
        t = nl.ndarray((P, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, i * 4 : i * 4 + 4])
        u = nl.ndarray((P, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(u, t, nl.multiply, float(SCALE))
        nisa.dma_copy(dst=out[:, nl.ds(i * 4, 4)], src=u)
    return out


@jit
def carried_in_place(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    v = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    for _ in nl.sequential_range(9):
        nisa.tensor_scalar(u, t, nl.multiply, 1.25)
        nisa.tensor_tensor(v, u, t, nl.maximum)
        nisa.tensor_copy(t, v)
    nl.store(out, t)
    return out


@jit
def rows_nested(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // (2 * P)):
        for j in range(2):
            row = (2 * i + j) * P
            t = nl.load(a[row : row + P, :])
            e = nl.exp(t)
            if USE_BIAS:
                nisa.tensor_scalar(e, e, nl.add, 0.5)
            nl.store(out[row : row + P, :], e)
    return out


@jit
def holds_the_last_tile(a):
    out = nl.ndarray((P, a.shape[1]), nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(a.shape[0] // P):
        t = nl.ndarray((P, a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * P : (i + 1) * P, :])
    nl.store(out, t)
    return out


@jit
def python_range_columns(a):
    """NKI 0.7's documented loop: Python's range (its events carry no loop frame, as before)."""
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in range(a.shape[1] // 4):
        t = nl.ndarray((P, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, i * 4 : i * 4 + 4])
        for _ in range(2):
            nisa.tensor_scalar(t, t, nl.multiply, SCALE)
        nisa.dma_copy(dst=out[:, i * 4 : i * 4 + 4], src=t)
    return out


@jit
def python_range_in_place(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    v = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    for _ in range(7):
        nisa.tensor_tensor(v, t, t, nl.add)
        nisa.tensor_scalar(t, v, nl.multiply, 0.5)
    nl.store(out, t)
    return out


# ---- bodies it cannot prove --------------------------------------------------------------------------------------
@jit
def first_iteration_differs(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        if i == 0:
            nisa.tensor_scalar(t, t, nl.multiply, 2.0)
        nl.store(out[i * P : (i + 1) * P, :], t)
    return out


@jit
def offsets_from_a_list(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    offs = [0, 1, 3, 2, 5, 4]
    for i in nl.affine_range(6):
        t = nl.load(a[offs[i] * P : offs[i] * P + P, :])
        nl.store(out[i * P : (i + 1) * P, :], t)
    return out


@jit
def calls_a_helper(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = _helper(nl.load(a[i * P : (i + 1) * P, :]))
        nl.store(out[i * P : (i + 1) * P, :], t)
    return out


@jit
def halves(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(8):
        t = nl.load(a[(i // 2) * P : (i // 2) * P + P, :])
        nl.store(out[(i // 2) * P : (i // 2) * P + P, :], t)
    return out


@jit
def counts_in_python(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    k = 0
    for _ in nl.sequential_range(a.shape[0] // P):
        t = nl.load(a[k * P : (k + 1) * P, :])
        nl.store(out[k * P : (k + 1) * P, :], t)
        k = k + 1
    return out


@jit
def index_after_the_loop(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        nl.store(out[i * P : (i + 1) * P, :], t)
    t = nl.load(a[i * P : (i + 1) * P, :])
    nl.store(out[0:P, :], t)
    return out


@jit
def prints_in_the_body(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        nl.device_print("tile", t)
        nl.store(out[i * P : (i + 1) * P, :], t)
    return out


@jit
def index_in_a_closure(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)

    def last_rows():
        return a[i * P : (i + 1) * P, :]

    for i in nl.affine_range(a.shape[0] // P):
        nl.store(out[i * P : (i + 1) * P, :], nl.load(a[i * P : (i + 1) * P, :]))
    nl.store(out[0:P, :], nl.load(last_rows()))
    return out


@jit
def python_range_index_after_the_loop(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in range(a.shape[0] // P):
        nl.store(out[i * P : (i + 1) * P, :], nl.load(a[i * P : (i + 1) * P, :]))
    nl.store(out[0:P, :], nl.load(a[i * P : (i + 1) * P, :]))
    return out


@jit
def python_range_from_a_list(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    rows = list(range(a.shape[0] // P))  # Python's own range: not a loop
    for i in range(len(rows)):
        r = rows[-1 - i]
        nl.store(out[i * P : (i + 1) * P, :], nl.load(a[r * P : (r + 1) * P, :]))
    return out


@jit
def overruns_at_the_end(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(5):
        t = nl.load(a[:, i * 4 : i * 4 + 4])
        nl.store(out[:, i * 4 : i * 4 + 4], t)
    return out


@jit
def matmul_06_semantics(a, b):
    out = nl.ndarray((P, 64), nl.float32, buffer=nl.shared_hbm)
    s = nl.load(a)
    m = nl.load(b)
    acc = nl.ndarray((P, 64), nl.float32, buffer=nl.psum)
    for _ in nl.affine_range(4):
        nisa.nc_matmul(acc, s, m)
    r = nl.ndarray((P, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(r, acc)
    nl.store(out, r)
    return out


def _same(kernel, args, capfd):
    """Run both ways; assert the same outcome; return (per-iteration run, program run, what explain_loops said)."""
    return same_with_loop_programs(trace, kernel, args, capfd)


def _rows(n: int, cols: int = 8) -> list[np.ndarray]:
    return [np.random.default_rng(11).standard_normal((n * P, cols)).astype(np.float32)]


PROVED = [
    ("columns", columns, lambda: [np.random.default_rng(3).standard_normal((P, 64)).astype(np.float32)]),
    (
        "python_range_columns",
        python_range_columns,
        lambda: [np.random.default_rng(3).standard_normal((P, 64)).astype(np.float32)],
    ),
    ("python_range_in_place", python_range_in_place, lambda: _rows(1, 4)),
    ("carried_in_place", carried_in_place, lambda: _rows(1, 4)),
    ("rows_nested", rows_nested, lambda: _rows(10)),
    ("holds_the_last_tile", holds_the_last_tile, lambda: _rows(6)),
]


@pytest.mark.parametrize("name,kernel,args", PROVED, ids=[p[0] for p in PROVED])
def test_a_proved_body_runs_as_a_program_with_the_same_results(name, kernel, args, capfd):
    slow, _, said = _same(kernel, args(), capfd)
    assert slow[0] == "ok"
    assert "loop program" in said, said


def test_the_results_are_the_oracles():
    x = np.random.default_rng(3).standard_normal((P, 64)).astype(np.float32)
    out, _ = trace(columns, x)
    assert np.isfinite(out).all() and np.any(out != 0)
    np.testing.assert_array_equal(out, (x * np.float32(SCALE)).astype(np.float32))
    (y,) = _rows(10)
    out, _ = trace(rows_nested, y)
    assert np.isfinite(out).all() and np.any(out != 0)
    np.testing.assert_allclose(out, np.exp(y) + 0.5, rtol=1e-5, atol=1e-6)


NOT_PROVED = [
    ("first_iteration_differs", first_iteration_differs, lambda: _rows(5), "`if` whose test"),
    ("offsets_from_a_list", offsets_from_a_list, lambda: _rows(6), "`offs` is subscripted with the loop index"),
    ("calls_a_helper", calls_a_helper, lambda: _rows(5), "calls _helper"),
    ("halves", halves, lambda: _rows(4), "not affine"),
    ("counts_in_python", counts_in_python, lambda: _rows(5), "carries `k`"),
    ("index_after_the_loop", index_after_the_loop, lambda: _rows(5), "read after the loop"),
    ("prints_in_the_body", prints_in_the_body, lambda: _rows(4, 2), "calls nl.device_print"),
    ("index_in_a_closure", index_in_a_closure, lambda: _rows(5), "read after the loop"),
    ("python_range_index_after_the_loop", python_range_index_after_the_loop, lambda: _rows(5), "read after the loop"),
    ("python_range_from_a_list", python_range_from_a_list, lambda: _rows(5), "`rows` is subscripted"),
    (
        "matmul_06_semantics",
        matmul_06_semantics,
        lambda: [
            np.random.default_rng(5).standard_normal((P, P)).astype(np.float32),
            np.random.default_rng(6).standard_normal((P, 64)).astype(np.float32),
        ],
        "semantics",
    ),
]


@pytest.mark.parametrize("name,kernel,args,why", NOT_PROVED, ids=[p[0] for p in NOT_PROVED])
def test_a_body_it_cannot_prove_runs_every_iteration_and_says_why(name, kernel, args, why, capfd):
    slow, _, said = _same(kernel, args(), capfd)
    assert slow[0] == "ok"
    assert "per iteration" in said and why in said, said


@jit
def overruns_inside_the_storage(a):
    out = nl.ndarray((64, 20), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(5):
        t = nl.load(a[0:64, i * 4 : i * 4 + 4])
        nl.store(out[:, i * 4 : i * 4 + 4], t)
    return out


@pytest.mark.parametrize("kernel", [overruns_at_the_end, overruns_inside_the_storage], ids=["rows", "inside"])
def test_an_index_past_the_end_is_the_same_error_at_the_same_iteration(kernel, capfd):
    """(Columns 16-19 of rows 0-63 of a (128, 16) tensor are inside its storage: only a per-dimension check sees it.)"""
    x = np.random.default_rng(2).standard_normal((P, 16)).astype(np.float32)
    slow, fast, said = _same(kernel, [x], capfd)
    assert fast[0] == "error" and "E008" in fast[2]
    assert "outside its dimension" in said, said


def test_a_loop_without_source_runs_every_iteration():
    ns = {"nl": nl, "nisa": nisa}
    exec(
        compile(
            "def k(a):\n"
            "    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)\n"
            "    for i in nl.affine_range(4):\n"
            "        nl.store(out[i * 128 : (i + 1) * 128, :], nl.load(a[i * 128 : (i + 1) * 128, :]))\n"
            "    return out\n",
            "<no file>",
            "exec",
        ),
        ns,
    )
    (x,) = _rows(4)
    out, tr = trace(jit(ns["k"]), x)
    np.testing.assert_array_equal(out, x)
    assert not tr.loop_runs  # no loop ran as a program


def test_a_python_range_loop_adds_no_loop_frame_and_no_cost_model_loop():
    """Python's range was invisible to the interpreter before: its events still carry no loop frame of it and the
    trace no loop run (the cost model reads what it read), program or not."""
    x = np.random.default_rng(3).standard_normal((P, 64)).astype(np.float32)
    for programs in (True, False):
        out, tr = trace(python_range_columns, x, options=SimOptions(loop_programs=programs))
        assert np.isfinite(out).all() and np.any(out != 0)
        np.testing.assert_array_equal(out, (x * np.float32(SCALE) * np.float32(SCALE)).astype(np.float32))
        assert tr.events and all(not e.loops for e in tr.events)
        assert not tr.loop_runs


def test_a_body_longer_than_the_recording_cap_runs_every_iteration(capfd, monkeypatch):
    """A traced iteration records at most MAX_BODY_CALLS instructions (a whole kernel inside a short loop costs more
    to record and prove than its few program iterations save): past it the loop runs every iteration."""
    from nki_kernels.sim.core import program

    monkeypatch.setattr(program, "MAX_BODY_CALLS", 2)
    x = np.random.default_rng(3).standard_normal((P, 64)).astype(np.float32)
    slow, _, said = _same(columns, [x], capfd)
    assert slow[0] == "ok"
    assert "per iteration: a body of more than 2 instructions" in said, said
