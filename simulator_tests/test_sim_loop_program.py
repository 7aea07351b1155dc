"""Loop programs (nki_kernels/sim/core/program.py): an affine_range body traced for two iterations and the rest
run at once must give what running every iteration gives -- outputs bit for bit, the trace event for event, the
same warnings and the same errors -- and must fall back to running every iteration where it cannot prove that.

Every kernel here runs both ways (``SimOptions(loop_programs=True/False)``); ``explain_loops`` says which way
each loop ran, so a test also fails when a loop it means to vectorise silently fell back."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import SimOptions, nisa, nki, nl
from nki_kernels.sim.core.errors import SimError
from nki_kernels.sim.nki01.kernel import trace_kernel
from sim_testing import run_loop_programs, same_with_loop_programs

P = 128


@nki.jit
def add_one_element_chunks(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    for m in nl.affine_range(a.shape[0]):
        ta = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[m : m + 1])
        nisa.dma_copy(dst=tb, src=b[m : m + 1])
        r = nisa.tensor_tensor(ta, tb, op=nl.add)
        nisa.dma_copy(dst=out[m : m + 1], src=r)
    return out


@nki.jit
def stream_blocks(a, b):
    """(n,) vectors as (blocks, P, F) views: nl.load / nl.multiply / nl.exp / nl.store per block."""
    f = 8
    a3 = a.reshape((a.shape[0] // (P * f), P, f))
    b3 = b.reshape((b.shape[0] // (P * f), P, f))
    out = nl.ndarray(a3.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a3.shape[0]):
        x = nl.load(a3[i])
        y = nl.load(b3[i])
        z = nl.exp(nl.multiply(x, y))
        nl.store(out[i], value=z)
    return out.reshape(a.shape)


@nki.jit
def columns_bf16(a):
    """Column slices of a (P, n) matrix, a bf16 copy and a subtract: views that move by 2 bytes per iteration."""
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for j in nl.affine_range(a.shape[1] // 2):
        t = nl.ndarray((P, 2), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * 2 : j * 2 + 2])
        c = nisa.tensor_copy(t, dtype=nl.bfloat16)
        d = nisa.tensor_tensor(c, c, op=nl.subtract)
        e = nisa.tensor_tensor(c, d, op=nl.maximum)
        nisa.dma_copy(dst=out[:, j * 2 : j * 2 + 2], src=e)
    return out


@nki.jit
def same_output_every_iteration(a):
    """Every iteration writes the same HBM rows: an iteration race (E029 under strict), never a program."""
    out = nl.ndarray((P, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        nl.store(out[0:P, :], value=t)
    return out


@nki.jit
def overruns_at_the_end(a):
    """Iteration 8 of 9 reads past the end of `a` (E008 at that iteration, as without programs)."""
    out = nl.ndarray((P, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(9):
        t = nl.load(a[i * 16 : i * 16 + 16, :])
        nl.store(out[i * 8 : i * 8 + 8, :], value=t[0:8, :])
    return out


@nki.jit
def python_state(a):
    """A Python counter updated in the body and read after it: traced once on hardware (a warning); per iteration."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    count = 0
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        nl.store(out[i * P : (i + 1) * P, :], value=t)
        count += 1
    assert count >= 1
    return out


@nki.jit
def predicate_if(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    first = nl.ndarray((P, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        nl.store(out[i * P : (i + 1) * P, :], value=t)
        if i == 0:
            nl.store(first, value=t)
    return out


@nki.jit
def nonaffine_index(a):
    out = nl.ndarray((4 * P, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(a[(i * i) * P : (i * i + 1) * P, :])
        nl.store(out[i * P : (i + 1) * P, :], value=t)
    return out


@nki.jit
def matmul_accumulate(a, b):
    """PSUM accumulation across iterations into a tile from before the loop (the K loop of a tiled matmul): a
    reduction the program adds in iteration order."""
    out = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((P, P), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // P):
        x = nl.load(a[k * P : (k + 1) * P, :])
        y = nl.load(b[k * P : (k + 1) * P, :])
        acc += nisa.nc_matmul(x, y)
    nl.store(out, value=nl.copy(acc))
    return out


@nki.jit
def reads_the_last_tile_after_the_loop(a):
    """A tile of the body read after the loop holds the last iteration's values."""
    out = nl.ndarray((P, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    rows = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = None
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        nl.store(rows[i * P : (i + 1) * P, :], value=t)
    nl.store(out, value=nl.exp(t))
    return out


def _run(kernel, args, programs: bool, capfd):
    return run_loop_programs(trace_kernel, kernel, args, programs, capfd)


def _same(kernel, args, capfd):
    """Run both ways; assert the same outcome; return (per-iteration run, program run, what explain_loops said)."""
    return same_with_loop_programs(trace_kernel, kernel, args, capfd)


def _rng():
    return np.random.default_rng(7)


VECTORISED = [
    ("add_one_element_chunks", add_one_element_chunks, lambda: [_rng().random(300, np.float32)] * 2),
    (
        "stream_blocks",
        stream_blocks,
        lambda: [_rng().random(P * 8 * 5, np.float32), _rng().random(P * 8 * 5, np.float32)],
    ),
    ("columns_bf16", columns_bf16, lambda: [_rng().standard_normal((P, 40)).astype(np.float32)]),
    (
        "reads_the_last_tile_after_the_loop",
        reads_the_last_tile_after_the_loop,
        lambda: [_rng().random((P * 5, 6), np.float32)],
    ),
]


@pytest.mark.parametrize("name,kernel,args", VECTORISED, ids=[v[0] for v in VECTORISED])
def test_a_program_computes_and_traces_what_every_iteration_does(name, kernel, args, capfd):
    _, _, said = _same(kernel, args(), capfd)
    assert "loop program" in said, said


FALLBACK = [
    (
        "same_output_every_iteration",
        same_output_every_iteration,
        lambda: [_rng().random((P * 4, 4), np.float32)],
        "iterations",
    ),
    ("overruns_at_the_end", overruns_at_the_end, lambda: [_rng().random((P, 4), np.float32)], "outside"),
    ("python_state", python_state, lambda: [_rng().random((P * 3, 4), np.float32)], "Python state"),
    ("predicate_if", predicate_if, lambda: [_rng().random((P * 4, 4), np.float32)], "predicate"),
    ("nonaffine_index", nonaffine_index, lambda: [_rng().random((10 * P, 4), np.float32)], "not affine"),
]


@pytest.mark.parametrize("name,kernel,args,why", FALLBACK, ids=[f[0] for f in FALLBACK])
def test_a_body_it_cannot_prove_runs_every_iteration_and_says_why(name, kernel, args, why, capfd):
    slow, _, said = _same(kernel, args(), capfd)
    assert "per iteration" in said and why in said, said


def test_the_error_of_a_late_iteration_names_that_iteration(capfd):
    slow, fast, _ = _same(overruns_at_the_end, [_rng().random((P, 4), np.float32)], capfd)
    assert fast[0] == "error" and "E008" in fast[2]


def test_bf16_rounding_is_the_op_cores():
    a = _rng().standard_normal((P, 40)).astype(np.float32)
    out = np.asarray(trace_kernel(columns_bf16, a, options=SimOptions())[0])
    want = a.astype(ml_dtypes.bfloat16)
    assert np.array_equal(out.astype(np.float32), np.maximum(want, want - want).astype(np.float32))


@nki.jit
def scale_and_shift(a, col):
    """tensor_scalar with a scalar and with a (P, 1) column, reversed; a sequential_range and a kernel `range`."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    c = nl.load(col)
    for i in nl.sequential_range(a.shape[1] // 4):
        t = nl.load(a[:, i * 4 : i * 4 + 4])
        u = nisa.tensor_scalar(t, nl.multiply, 3.0, op1=nl.subtract, operand1=c, reverse1=True)
        nl.store(out[:, i * 4 : i * 4 + 4], value=u)
    for i in range(a.shape[1] // 4):
        t = nl.load(out[:, i * 4 : i * 4 + 4])
        nl.store(out[:, i * 4 : i * 4 + 4], value=nisa.tensor_scalar(t, np.add, 1))
    return out


def test_tensor_scalar_and_sequential_loops_run_as_programs(capfd):
    a = _rng().standard_normal((P, 24)).astype(np.float32)
    col = _rng().standard_normal((P, 1)).astype(np.float32)
    _, _, said = _same(scale_and_shift, [a, col], capfd)
    # a tile loaded before the loop and used in it; the second loop reads and rewrites its own columns
    assert said.count("loop program") == 2, said


def test_a_trace_only_run_is_the_same_both_ways(capfd):
    a = _rng().random(P * 8 * 5, np.float32)
    runs = []
    for programs in (False, True):
        opts = SimOptions(loop_programs=programs, trace_only=True)
        runs.append(trace_kernel(stream_blocks, a, a, options=opts))
    assert runs[0][1].events == runs[1][1].events
    assert np.array_equal(np.asarray(runs[0][0]), np.asarray(runs[1][0]))


@nki.jit
def arange_tiles(a):
    """nl.arange subscripts moved by the loop index (index-array views)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(8)[None, :]
    for j in nl.affine_range(a.shape[1] // 8):
        t = nl.load(a[i_p, j * 8 + i_f])
        u = nl.multiply(t, t)
        nl.store(out[i_p, j * 8 + i_f], value=u)
    return out


@nki.jit
def arange_nonaffine(a):
    out = nl.ndarray((P, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(8)[None, :]
    for j in nl.affine_range(4):
        t = nl.load(a[i_p, i_f + j * j])
        nl.store(out[i_p, j * 8 + i_f], value=t)
    return out


@nki.jit
def arange_overrun(a):
    out = nl.ndarray((P, 48), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(8)[None, :]
    for j in nl.affine_range(6):
        t = nl.load(a[i_p, j * 8 + i_f])
        nl.store(out[i_p, j * 8 + i_f], value=t)
    return out


def test_index_array_subscripts_run_as_programs(capfd):
    _, _, said = _same(arange_tiles, [_rng().standard_normal((P, 48)).astype(np.float32)], capfd)
    assert "loop program" in said, said


@pytest.mark.parametrize(
    "kernel,why", [(arange_nonaffine, "not affine"), (arange_overrun, "outside")], ids=["nonaffine", "overrun"]
)
def test_index_array_subscripts_it_cannot_prove_run_every_iteration(kernel, why, capfd):
    slow, _, said = _same(kernel, [_rng().standard_normal((P, 40)).astype(np.float32)], capfd)
    assert "per iteration" in said and why in said, said


def test_the_instruction_cap_stops_at_the_same_instruction(capfd):
    """A program runs the iterations under the cap; the per-iteration path runs the rest and raises E031 there."""
    a = [_rng().random(300, np.float32)] * 2
    runs = []
    for programs in (False, True):
        opts = SimOptions(loop_programs=programs, explain_loops=True, max_instructions=701)
        with pytest.raises(SimError) as e:
            trace_kernel(add_one_element_chunks, *a, options=opts)
        runs.append(str(e.value))
    said = capfd.readouterr().err
    assert runs[0] == runs[1] and "E031" in runs[0]
    assert "the instruction cap" in said and "loop program" in said, said


@nki.jit
def transcendental_on_strided_views(a):
    """exp / log / sin of column slices of a tile: the per-iteration path applies them to strided views, the
    program to arrays with an iteration axis; NumPy must give the same bits either way."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[1] // 8):
        t = nl.load(a[:, i * 8 : i * 8 + 8])
        u = nl.exp(t[:, 0:4])
        v = nl.sin(t[:, 4:8])
        w = nl.log(nl.add(nl.exp(u), v))
        nl.store(out[:, i * 8 : i * 8 + 4], value=w)
        nl.store(out[:, i * 8 + 4 : i * 8 + 8], value=nl.tanh(v))
    return out


def test_transcendental_functions_give_the_same_bits(capfd):
    a = _rng().uniform(-2.0, 2.0, (P, 8 * 37)).astype(np.float32)
    _, _, said = _same(transcendental_on_strided_views, [a], capfd)
    assert "loop program" in said, said


@nki.jit
def prints_in_the_body(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        t = nl.load(a[i * P : (i + 1) * P, :])
        print("iteration")
        nl.store(out[i * P : (i + 1) * P, :], value=t)
    return out


def test_a_body_with_a_python_side_effect_runs_every_iteration(capfd):
    """print / append in the body: the effect happens once per iteration, as without programs."""
    opts = SimOptions(explain_loops=True)
    trace_kernel(prints_in_the_body, _rng().random((P * 5, 4), np.float32), options=opts)
    out, said = capfd.readouterr()
    assert out.count("iteration\n") == 5 and "the body calls print" in said, (out, said)


@nki.jit
def assigned_results(a):
    """`t[...] = nl.exp(x)` (the result lands in t, rounded once to t's bf16) and `u[...] = nl.load(...)`."""
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[1] // 4):
        u = nl.ndarray((P, 4), dtype=a.dtype, buffer=nl.sbuf)
        u[...] = nl.load(a[:, i * 4 : i * 4 + 4])
        t = nl.ndarray((P, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
        t[...] = nl.exp(u)
        nl.store(out[:, i * 4 : i * 4 + 4], value=t)
    return out


@nki.jit
def accumulated_in_sbuf(a):
    out = nl.ndarray((P, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((P, 4), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(a.shape[1] // 4):
        acc[...] = nl.add(acc, nl.load(a[:, i * 4 : i * 4 + 4]))
    nl.store(out, value=acc)
    return out


def test_assigned_results_run_as_programs(capfd):
    _, _, said = _same(assigned_results, [_rng().standard_normal((P, 48)).astype(np.float32)], capfd)
    assert "loop program" in said, said


def test_an_accumulation_through_assignment_runs_in_order(capfd):
    a = _rng().standard_normal((P, 48)).astype(np.float32)
    _, fast, said = _same(accumulated_in_sbuf, [a], capfd)
    assert "loop program" in said and "in order, one at a time" in said, said
    want = np.zeros((P, 4), np.float32)
    for i in range(12):
        want = want + a[:, i * 4 : i * 4 + 4]  # fp32 adds in iteration order, as the kernel's
    assert np.array_equal(np.asarray(fast[1]), want)


# ---- matmul loops: loops in the body, PSUM body tiles, `psum += nc_matmul`, tensor_reduce, activation ---------------


def _conv_rows(pool: int, dtype=nl.float32, bias_kind: str = "column"):
    """A 3x3 convolution as a CS149 kernel writes one: per row tile a PSUM tile from nl.zeros, an inner ci / kh / kw
    nest of `ps += nc_matmul(...)` over a resident window, then (pool 2) a max over row pairs out of PSUM and an
    activation with a bias into an SBUF staging tile, stored once after the loop."""

    @nki.jit
    def conv_rows(x, w, b):
        rows, width = x.shape[1] - 2, x.shape[2] - 2
        out = nl.ndarray((P, rows // pool, width), dtype=nl.float32, buffer=nl.shared_hbm)
        x_sb = nl.ndarray((P, 1, rows + 2, width + 2), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb[:, 0, :, :], src=x)
        w_sb = nl.ndarray((P, 1, 9, P), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_sb[:, 0, :, :], src=w)
        b_sb = nl.load(b) if bias_kind == "column" else None
        o_sb = nl.ndarray((P, rows // pool, width), dtype=nl.float32, buffer=nl.sbuf)
        for rt in nl.affine_range(rows // 2):
            ps = nl.zeros((P, 2, width), dtype=nl.float32, buffer=nl.psum)
            for ci in nl.affine_range(1):
                for kh in nl.affine_range(3):
                    for kw in nl.affine_range(3):
                        ps += nisa.nc_matmul(
                            w_sb[:, ci, kh * 3 + kw, :], x_sb[:, ci, rt * 2 + kh : rt * 2 + kh + 2, kw : kw + width]
                        )
            bias = b_sb if bias_kind == "column" else 0.5
            if pool == 2:
                mx = nisa.tensor_reduce(nl.max, ps, axis=1, dtype=nl.float32)
                o_sb[:, rt, :] = nisa.activation(op=nl.copy, data=mx, bias=bias, dtype=nl.float32)
            else:
                o_sb[:, rt * 2 : rt * 2 + 2, :] = nisa.activation(op=nl.exp, data=ps, bias=bias, scale=0.125)
        nisa.dma_copy(dst=out, src=o_sb)
        return out

    return conv_rows


def _conv_args(rows: int = 10, width: int = 30, dtype=np.float32):
    r = _rng()
    x = (r.standard_normal((P, rows + 2, width + 2)) * 0.1).astype(dtype)
    w = (r.standard_normal((P, 9, P)) * 0.1).astype(dtype)
    return [x, w, r.standard_normal((P, 1)).astype(np.float32)]


@pytest.mark.parametrize(
    "pool,dtype,bias_kind",
    [(2, np.float32, "column"), (1, np.float32, "number"), (2, ml_dtypes.bfloat16, "number")],
    ids=["maxpool-fp32", "exp-fp32", "maxpool-bf16"],
)
def test_a_matmul_loop_with_loops_in_its_body_runs_as_a_program(pool, dtype, bias_kind, capfd):
    """The row-tile loop runs as a program: its inner loops are traced through, its PSUM tile, fills, matmul
    accumulations, reduction and activation run for the other iterations at once, with the same bits and events."""
    kernel = _conv_rows(pool, nl.bfloat16 if dtype is ml_dtypes.bfloat16 else nl.float32, bias_kind)
    slow, fast, said = _same(kernel, _conv_args(dtype=dtype), capfd)
    assert "affine_range(5)" in said and "loop program: iterations 0-1 traced, 2-4 run at once" in said, said
    assert "traced as part of the enclosing loop's body" in said, said
    # the inner loops' frames in the program's events: a fresh loop id per entry, as when every iteration runs
    mm = [e for e in fast[2].events if e.op == "nc_matmul"]
    assert len(mm) == 5 * 9 and len({e.loops[-1].loop_id for e in mm}) == 5 * 3


def test_matmul_products_are_the_ones_of_numpy():
    """The program's accumulated products against a NumPy oracle (not only against the per-iteration path)."""
    x, w, b = _conv_args()
    out = np.asarray(trace_kernel(_conv_rows(2), x, w, b, options=SimOptions())[0])
    rows, width = x.shape[1] - 2, x.shape[2] - 2
    conv = np.zeros((P, rows, width), np.float64)
    for kh in range(3):
        for kw in range(3):
            conv += np.einsum("km,krw->mrw", w[:, kh * 3 + kw, :], x[:, kh : kh + rows, kw : kw + width])
    want = conv.reshape(P, rows // 2, 2, width).max(axis=2) + b[:, :, None]
    assert np.isfinite(out).all() and np.any(out != 0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_a_trace_only_matmul_loop_is_the_same_both_ways(capfd):
    runs = []
    for programs in (False, True):
        opts = SimOptions(loop_programs=programs, trace_only=True)
        runs.append(trace_kernel(_conv_rows(2), *_conv_args(), options=opts))
    assert runs[0][1].events == runs[1][1].events
    assert np.array_equal(np.asarray(runs[0][0]), np.asarray(runs[1][0]))


@nki.jit
def long_inner_loop(a):
    """An inner loop of more iterations than the outer one: the inner loop is the program, the outer is not."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // P):
        for j in nl.affine_range(a.shape[1] // 2):
            t = nl.load(a[i * P : (i + 1) * P, j * 2 : j * 2 + 2])
            nl.store(out[i * P : (i + 1) * P, j * 2 : j * 2 + 2], value=nl.exp(t))
    return out


def test_a_longer_inner_loop_is_the_program(capfd):
    _, _, said = _same(long_inner_loop, [_rng().random((4 * P, 16), np.float32)], capfd)
    assert "affine_range(4)" in said and "a loop of 8 iterations in the body" in said, said
    assert "affine_range(8)" in said and "loop program" in said, said


def _psum_matmul_then_copy(before_loop: bool):
    """`ps += nc_matmul(x, x)` then a copy of ps out of PSUM, per row.  ``before_loop`` False: ps is a body tile
    from nl.ndarray, so the first `+=` overwrites never-written PSUM (per-element state the program does not model);
    True: ps is one nl.zeros tile from before the loop, read in the body (its reads would see the other iterations'
    sums).  Either way: per iteration."""

    @nki.jit
    def psum_then_copy(a):
        out = nl.ndarray((4 * P, P), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((P, P), dtype=nl.float32, buffer=nl.psum) if before_loop else None
        for i in nl.affine_range(4):
            x = nl.load(a[i * P : (i + 1) * P, :])
            ps = acc if before_loop else nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
            ps += nisa.nc_matmul(x, x)
            nl.store(out[i * P : (i + 1) * P, :], value=nisa.tensor_copy(ps))
        return out

    return psum_then_copy


@pytest.mark.parametrize(
    "before_loop,why",
    [(False, "not written everywhere"), (True, "other than as a `+=` accumulator")],
    ids=["unwritten-body-psum", "accumulator-read-in-the-loop"],
)
def test_psum_it_cannot_prove_runs_every_iteration(before_loop, why, capfd):
    _, _, said = _same(_psum_matmul_then_copy(before_loop), [_rng().random((4 * P, P), np.float32)], capfd)
    assert "per iteration" in said and why in said, said


@nki.jit
def nl_matmul_rows(x, w):
    """`ps += nl.matmul(w, x, transpose_x=True)` (one nc_matmul) over three taps per row tile, copied out of PSUM."""
    out = nl.ndarray((P, 8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.load(x)
    w_sb = nl.load(w)
    for r in nl.affine_range(8):
        ps = nl.zeros((P, 16), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(3):
            ps += nl.matmul(w_sb[:, k, :], x_sb[:, r + k, :], transpose_x=True)
        nl.store(out[:, r, :], value=nisa.tensor_copy(ps))
    return out


def test_nl_matmul_with_transpose_x_runs_as_a_program(capfd):
    r = _rng()
    x, w = r.standard_normal((P, 10, 16)).astype(np.float32), r.standard_normal((P, 3, P)).astype(np.float32)
    _, fast, said = _same(nl_matmul_rows, [x, w], capfd)
    assert "affine_range(8)" in said and "loop program" in said, said
    want = sum(np.einsum("km,krn->mrn", w[:, k, :], x[:, k : k + 8, :]) for k in range(3))
    np.testing.assert_allclose(np.asarray(fast[1]), want, rtol=1e-4, atol=1e-4)


@nki.jit
def conv_rows_2024_style(x, w, b):
    """The 2024 CS149 style: a sequential row loop with nl.load of the input rows and nl.load_transpose2d of each
    tap's weights inside it, `acc += nl.matmul(..., transpose_x=True)`, the bias added with nl.add of a column,
    a 2x2 max-pool with nl.max over axes (1, 3) of a reshaped copy, nl.store."""
    rows, width = x.shape[1] - 2, x.shape[2] - 2
    out = nl.ndarray((P, rows // 2, width // 2), dtype=nl.float32, buffer=nl.shared_hbm)
    b_tile = nl.load(b)
    for h in nl.sequential_range(rows // 2):
        pair = nl.ndarray((P, 2, width), dtype=nl.float32, buffer=nl.sbuf)
        for r in nl.sequential_range(2):
            acc = nl.zeros((P, width), dtype=nl.float32, buffer=nl.psum)
            xt = nl.load(x[:, h * 2 + r : h * 2 + r + 3, :])
            for kh in nl.affine_range(3):
                for kw in nl.affine_range(3):
                    wt = nl.load_transpose2d(w[:, kh, kw, :])
                    acc += nl.matmul(wt, xt[:, kh, kw : kw + width], transpose_x=True)
            pair[:, r, :] = nl.add(acc, b_tile)
        window = nl.copy(pair).reshape((P, 2, width // 2, 2))
        nl.store(out[:, h, :], value=nl.max(window, axis=[1, 3]))
    return out


def test_the_2024_style_row_loop_runs_as_a_program(capfd):
    r = _rng()
    x = (r.standard_normal((P, 12, 18)) * 0.1).astype(np.float32)
    w = (r.standard_normal((P, 3, 3, P)) * 0.1).astype(np.float32)
    b = r.standard_normal((P, 1)).astype(np.float32)
    _, fast, said = _same(conv_rows_2024_style, [x, w, b], capfd)
    assert "sequential_range(5)" in said and "loop program: iterations 0-1 traced, 2-4 run at once" in said, said
    conv = sum(
        np.einsum("mk,krw->mrw", w[:, kh, kw, :], x[:, kh : kh + 10, kw : kw + 16])
        for kh in range(3)
        for kw in range(3)
    )
    want = (conv + b[:, :, None]).reshape(P, 5, 2, 8, 2).max(axis=(2, 4))
    np.testing.assert_allclose(np.asarray(fast[1]), want, rtol=1e-4, atol=1e-4)


# ---- buffers reused by every iteration of an ordered loop; tensors that may hold poison -----------------------------


def _reused_row_buffer(kind: str, carry: bool = False):
    """The naive CS149 shape: one input-row SBUF buffer refilled by every iteration (and a staging tile), read
    after the refill; ``carry``: the iteration also reads the row buffer before refilling it (a value carried to
    the next iteration)."""

    @nki.jit
    def reused(x, w):
        out = nl.ndarray((P, x.shape[1], 16), dtype=nl.float32, buffer=nl.shared_hbm)
        row = nl.ndarray((P, 18), dtype=x.dtype, buffer=nl.sbuf)
        stage = nl.ndarray((P, 16), dtype=nl.float32, buffer=nl.sbuf)
        w_sb = nl.load(w)
        loop = nl.sequential_range if kind == "sequential" else nl.affine_range
        for h in loop(x.shape[1]):
            acc = nl.zeros((P, 16), dtype=nl.float32, buffer=nl.psum)
            if carry:
                nl.store(out[:, h, :], value=nl.copy(row[:, 0:16]))
            nisa.dma_copy(dst=row, src=x[:, h, :])
            for j in nl.sequential_range(3):
                acc += nisa.nc_matmul(w_sb[:, j, :], row[:, j : j + 16])
            stage[...] = nisa.tensor_copy(acc)
            nisa.dma_copy(dst=out[:, h, :], src=stage)
        return out

    return reused


def _row_args():
    r = _rng()
    return [r.standard_normal((P, 6, 18)).astype(np.float32), r.standard_normal((P, 3, P)).astype(np.float32)]


def test_a_buffer_reused_by_every_iteration_of_a_sequential_loop_runs_as_a_program(capfd):
    _, fast, said = _same(_reused_row_buffer("sequential"), _row_args(), capfd)
    assert "sequential_range(6)" in said and "loop program" in said, said
    x, w = _row_args()
    want = sum(np.einsum("km,khn->mhn", w[:, j, :], x[:, :, j : j + 16]) for j in range(3))
    np.testing.assert_allclose(np.asarray(fast[1]), want, rtol=1e-4, atol=1e-4)


def test_a_reused_buffer_that_carries_values_runs_in_order(capfd):
    _, _, said = _same(_reused_row_buffer("sequential", True), _row_args(), capfd)
    assert "sequential_range(6)" in said and "in order, one at a time" in said, said


def test_a_reused_buffer_in_an_affine_loop_runs_every_iteration(capfd):
    _, _, said = _same(_reused_row_buffer("affine"), _row_args(), capfd)
    assert "per iteration" in said and "same elements" in said, said


@nki.jit
def reads_the_written_half(a):
    """A tile half written before the loop (the other half never written) read by every iteration: its written half
    only, so the reads find no poison; the per-iteration path counts them (Tensor._check_poison)."""
    out = nl.ndarray((P, 8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:4], src=a)
    for i in nl.affine_range(8):
        nl.store(out[:, i, :], value=nl.multiply(t[:, 0:4], float(1)))
    return out


def test_reads_of_a_tensor_that_may_hold_poison_run_as_a_program_when_they_find_none(capfd):
    _, _, said = _same(reads_the_written_half, [_rng().random((P, 4), np.float32)], capfd)
    assert "affine_range(8)" in said and "loop program" in said, said


@pytest.mark.parametrize(
    "scans,m,clean",
    [
        (0, 0, True),
        (1, 1, True),
        (2, 1, True),
        (3, 5, True),
        (3, 4, True),
        (5, 2, True),
        (5, 100, False),
        (8, 7, True),
        (8, 8, True),
    ],
)
def test_clean_reads_are_counted_as_the_poison_check_counts_them(scans, m, clean):
    from types import SimpleNamespace

    from nki_kernels.sim.core import dtypes as dt
    from nki_kernels.sim.core.program import _count_clean_reads

    arr = np.zeros((4, 4), np.float32) if clean else dt.poison_fill((4, 4), dt.float32, np.dtype(np.float32))
    got = SimpleNamespace(poison_scans=scans, unwritten=True, array=arr)
    _count_clean_reads(got, m)  # type: ignore[arg-type]
    # Tensor._check_poison, one clean read at a time
    want = SimpleNamespace(poison_scans=scans, unwritten=True)
    for _ in range(m):
        if not want.unwritten:
            break
        n = want.poison_scans = want.poison_scans + 1
        if not n & (n - 1) and clean:
            want.unwritten = False
    assert (got.poison_scans, got.unwritten) == (want.poison_scans, want.unwritten)


@nki.jit
def carried_python_offset(a):
    """A Python offset the body reads and then advances by a growing step: iteration k reads columns the first two
    iterations do not predict (0, 4, 12, 24, ...), so every iteration runs."""
    out = nl.ndarray((P, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    off = 0
    step = 0
    for i in nl.affine_range(8):
        t = nl.load(a[:, off : off + 4])
        nl.store(out[:, i * 4 : i * 4 + 4], value=t)
        step += 4
        off += step
    return out


def test_python_state_carried_between_iterations_runs_every_iteration(capfd):
    slow, fast, said = _same(carried_python_offset, [_rng().random((P, 160), np.float32)], capfd)
    assert "per iteration" in said and "carries Python state" in said and "`off`" in said, said


@nki.jit
def k_loop_two_accumulators(a, b):
    """A K loop with two `+=` per iteration onto each of two PSUM tiles from before the loop (nl.ndarray: the
    first `+=` overwrites): the sums must be added iteration by iteration, in program order."""
    out = nl.ndarray((2 * P, P), dtype=nl.float32, buffer=nl.shared_hbm)
    acc0 = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
    acc1 = nl.zeros((P, P), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // (2 * P)):
        x0 = nl.load(a[k * 2 * P : k * 2 * P + P, :])
        x1 = nl.load(a[k * 2 * P + P : (k + 1) * 2 * P, :])
        y0 = nl.load(b[k * 2 * P : k * 2 * P + P, :])
        y1 = nl.load(b[k * 2 * P + P : (k + 1) * 2 * P, :])
        acc0 += nisa.nc_matmul(x0, y0)
        acc1 += nisa.nc_matmul(x1, y0)
        acc0 += nisa.nc_matmul(x1, y1)
        acc1 += nisa.nc_matmul(x0, y1)
    nl.store(out[0:P, :], value=nl.copy(acc0))
    nl.store(out[P : 2 * P, :], value=nl.copy(acc1))
    return out


@pytest.mark.parametrize("kernel", [matmul_accumulate, k_loop_two_accumulators], ids=["one", "two-per-iteration"])
def test_a_k_loop_accumulating_into_psum_from_before_the_loop_runs_as_a_program(kernel, capfd):
    r = _rng()
    a, b = r.standard_normal((P * 8, P)).astype(np.float32), r.standard_normal((P * 8, P)).astype(np.float32)
    _, fast, said = _same(kernel, [a, b], capfd)
    assert "loop program" in said, said
    out = np.asarray(fast[1])
    if kernel is matmul_accumulate:
        np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-3)
    else:
        a4, b4 = a.reshape(4, 2, P, P), b.reshape(4, 2, P, P)
        want0 = sum(a4[k, 0].T @ b4[k, 0] + a4[k, 1].T @ b4[k, 1] for k in range(4))
        want1 = sum(a4[k, 1].T @ b4[k, 0] + a4[k, 0].T @ b4[k, 1] for k in range(4))
        np.testing.assert_allclose(out, np.concatenate([want0, want1]), rtol=1e-4, atol=1e-3)


@nki.jit
def transpose_per_row(x, w):
    """A naive row loop that transposes its weight tile on TensorE in every iteration (nc_transpose into PSUM, a
    copy to SBUF, the matmul), and an nl.transpose of the row tile."""
    out = nl.ndarray((P, x.shape[1], P), dtype=nl.float32, buffer=nl.shared_hbm)
    for h in nl.sequential_range(x.shape[1]):
        w_raw = nl.load(w[:, h, :])
        w_t = nisa.tensor_copy(nisa.nc_transpose(w_raw))
        row = nl.load(x[:, h, :])
        ps = nl.zeros((P, P), dtype=nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(w_t, row)
        rt = nisa.tensor_copy(nl.transpose(nisa.tensor_copy(ps)))
        nl.store(out[:, h, :], value=rt)
    return out


def test_transposes_in_the_body_run_as_a_program(capfd):
    r = _rng()
    x, w = r.standard_normal((P, 5, P)).astype(np.float32), r.standard_normal((P, 5, P)).astype(np.float32)
    _, fast, said = _same(transpose_per_row, [x, w], capfd)
    assert "sequential_range(5)" in said and "loop program" in said, said
    want = np.stack([(w[:, h, :] @ x[:, h, :]).T for h in range(5)], axis=1)
    np.testing.assert_allclose(np.asarray(fast[1]), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kernel", [transpose_per_row, k_loop_two_accumulators], ids=["transposes", "k-loop"])
def test_trace_only_runs_of_matmul_programs_are_the_same_both_ways(kernel):
    r = _rng()
    if kernel is transpose_per_row:
        args = [r.standard_normal((P, 5, P)).astype(np.float32), r.standard_normal((P, 5, P)).astype(np.float32)]
    else:
        args = [r.standard_normal((P * 8, P)).astype(np.float32), r.standard_normal((P * 8, P)).astype(np.float32)]
    runs = [trace_kernel(kernel, *args, options=SimOptions(loop_programs=p, trace_only=True)) for p in (False, True)]
    assert runs[0][1].events == runs[1][1].events
    assert np.array_equal(np.asarray(runs[0][0]), np.asarray(runs[1][0]))


# ---- ordered loops whose iterations depend on each other: run in order, one iteration at a time ---------------------


def _carried(kind: str):
    """A tile carried from one iteration to the next (``t = f(t)``), stored by the next iteration; the last
    instruction's result waits for its destination at the end of every iteration (the next iteration's first read
    records it; the last one's is recorded when the kernel returns)."""

    @nki.jit
    def carried(a):
        out = nl.ndarray((P, a.shape[1] * 9), dtype=nl.float32, buffer=nl.shared_hbm)
        f = a.shape[1]
        t = nl.load(a)
        loop = nl.sequential_range if kind == "sequential" else nl.affine_range
        for i in loop(9):
            nl.store(out[:, i * f : (i + 1) * f], value=t)
            u = nisa.tensor_scalar(t, nl.multiply, 0.75, op1=nl.add, operand1=0.125)
            v = nisa.tensor_tensor(u, t, nl.maximum)
            t = nisa.tensor_copy(v)
        return out

    return carried


def test_a_tile_carried_across_a_sequential_loop_runs_in_order(capfd):
    a = _rng().standard_normal((P, 6)).astype(np.float32)
    _, fast, said = _same(_carried("sequential"), [a], capfd)
    assert "in order, one at a time" in said and "8 per iteration (its result waits" in said, said
    want, t = [], a.copy()
    for _ in range(9):
        want.append(t)
        t = np.maximum(t * np.float32(0.75) + np.float32(0.125), t)
    assert np.array_equal(np.asarray(fast[1]), np.concatenate(want, axis=1))


def test_a_tile_carried_across_an_affine_loop_runs_every_iteration(capfd):
    """(also: the traced iterations keep no tile alive longer than running every iteration does: _same compares the
    peak SBUF use)"""
    _, _, said = _same(_carried("affine"), [_rng().standard_normal((P, 6)).astype(np.float32)], capfd)
    assert "per iteration" in said and "waits for its destination" in said, said


# A kernel without source (a notebook cell, `python -`) reads a tile of the loop's last iteration after the loop:
# the scope rule (E027) needs the source, so it runs; that read's event names the last iteration's tile.
_SOURCELESS = """
def body_tile_read_after_the_loop(a):
    out = nl.ndarray((128 * 6, a.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    last = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(last, value=t)
    for i in nl.affine_range(6):
        t = nl.exp(nl.load(a))
        nl.store(out[i * 128 : (i + 1) * 128, :], value=t)
        nl.store(out[i * 128 : (i + 1) * 128, :], value=t)
    nl.store(last, value=nl.exp(t))
    return out
"""


def test_a_body_tile_read_after_the_loop_is_the_last_iterations(capfd):
    ns = {"nl": nl}
    exec(compile(_SOURCELESS, "<no source>", "exec"), ns)
    kernel = nki.jit(ns["body_tile_read_after_the_loop"])
    _, fast, said = _same(kernel, [_rng().standard_normal((P, 4)).astype(np.float32)], capfd)
    assert "run at once" in said, said


@nki.jit
def races_only_in_later_iterations(a):
    """Two iterations of the affine loop write the same columns only in the inner loop's iterations 2 and later
    (columns i + 2 o): the race the inner loop's program runs must still be found (E029)."""
    out = nl.ndarray((P, 4 * 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for o in nl.affine_range(2):
        for i in nl.sequential_range(6):
            t = nl.load(a)
            nl.store(out[:, (i + 2 * o) * 4 : (i + 2 * o) * 4 + 4], value=t)
    return out


def test_a_race_of_an_enclosing_affine_loop_in_the_programs_iterations_is_found(capfd):
    slow, fast, said = _same(races_only_in_later_iterations, [_rng().standard_normal((P, 4)).astype(np.float32)], capfd)
    assert slow[0] == "error" and "E029" in slow[2], slow
    assert "loop program" in said, said


# ---- nl.static_range: unrolled (an int index, the body's Python per iteration); a program where its source proves
# the iterations alike (sim/loopproof.py) -------------------------------------------------------------------------
@nki.jit
def static_columns(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.static_range(a.shape[1] // 4):
        t = nl.load(a[:, j * 4 : j * 4 + 4])
        u = nisa.tensor_scalar(t, nl.multiply, 1.5, op1=nl.add, operand1=0.25)
        nl.store(out[:, nl.ds(j * 4, 4)], value=u)
    return out


@nki.jit
def static_carried_tile(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    acc[...] = nl.multiply(t, 0.0)
    for _ in nl.static_range(6):
        acc[...] = nl.add(acc, t)
    nl.store(out, value=acc)
    return out


@nki.jit
def static_offsets_from_a_list(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    offs = [3, 0, 2, 1, 5, 4]
    for j in nl.static_range(6):
        t = nl.load(a[:, offs[j] * 4 : offs[j] * 4 + 4])
        nl.store(out[:, j * 4 : j * 4 + 4], value=t)
    return out


@nki.jit
def static_first_differs(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.static_range(a.shape[1] // 4):
        t = nl.load(a[:, j * 4 : j * 4 + 4])
        if j == 0:
            t = nl.exp(t)
        nl.store(out[:, j * 4 : j * 4 + 4], value=t)
    return out


@pytest.mark.parametrize("kernel", [static_columns, static_carried_tile], ids=["columns", "carried"])
def test_a_static_range_its_source_proves_runs_as_a_program(kernel, capfd):
    x = _rng().standard_normal((P, 24)).astype(np.float32)
    _, _, said = _same(kernel, [x], capfd)
    assert "static_range(6)" in said and "loop program" in said, said


@pytest.mark.parametrize(
    "kernel,why",
    [(static_offsets_from_a_list, "`offs` is subscripted"), (static_first_differs, "`if` whose test")],
    ids=["list", "if"],
)
def test_a_static_range_its_source_does_not_prove_runs_every_iteration(kernel, why, capfd):
    x = _rng().standard_normal((P, 24)).astype(np.float32)
    _, _, said = _same(kernel, [x], capfd)
    assert "static_range(6)" in said and "per iteration" in said and why in said, said


def test_static_range_programs_compute_the_oracle():
    x = _rng().standard_normal((P, 24)).astype(np.float32)
    out, _ = trace_kernel(static_columns, x)
    assert np.isfinite(out).all() and np.any(out != 0)
    np.testing.assert_allclose(out, x * 1.5 + 0.25, rtol=1e-6, atol=1e-6)
    out, _ = trace_kernel(static_carried_tile, x)
    assert np.isfinite(out).all() and np.any(out != 0)
    np.testing.assert_allclose(out, 6 * x, rtol=1e-5, atol=1e-6)


@nki.jit
def static_overruns_inside_the_storage(a):
    """Columns 16-19 of rows 0-63 of a (128, 16) tensor are outside dimension 1 but inside its storage (rows 1-64):
    only a per-dimension bounds check finds that the last iterations overrun."""
    out = nl.ndarray((64, 24), dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.static_range(6):
        t = nl.load(a[0:64, j * 4 : j * 4 + 4])
        nl.store(out[:, j * 4 : j * 4 + 4], value=t)
    return out


def test_a_static_range_that_overruns_a_dimension_is_the_same_error(capfd):
    x = np.arange(P * 16, dtype=np.float32).reshape(P, 16)
    slow, fast, said = _same(static_overruns_inside_the_storage, [x], capfd)
    assert fast[0] == "error" and "E008" in fast[2], fast
    assert "outside its dimension" in said, said
