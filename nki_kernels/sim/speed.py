"""Interpreter speed: per-instruction overhead on small tiles and a loop of nc_matmuls,
each as a ratio to doing the same NumPy math directly (``nki-kernels sim-bench``); and the cost
model's scheduling rate (instructions per second of ``estimate_trace``) on a long loop trace.

These are measurements of the *interpreter* on this machine, not of Trainium.  Times are
the process's CPU time (``time.process_time``), best of several runs, so that other load on
a shared 2-core machine does not inflate them; with an idle machine wall time is the same.

The benchmark kernels are compiled under file names ``<sim-bench kernel N>``: the interpreter treats
every frame in its own package as its own (it looks for the user's line outside it), and a kernel of
a user's is outside it.  The NKI 0.7 ones have their source in ``linecache``, as a user's file would:
an NKI 0.7 loop needs its source to run as a loop program (sim/loopproof.py).
"""

from __future__ import annotations

import itertools
import linecache
import textwrap
import time

import numpy as np

from nki_kernels.perf.model import ModelOptions, build_options, estimate_trace, trace_of

from .core.options import SimOptions
from .nki01 import isa as nisa
from .nki01 import language as nl
from .nki01.kernel import jit, simulate_kernel
from .nki07 import isa as nisa7
from .nki07 import language as nl7
from .nki07 import nki as nki7

_files = itertools.count(1)


def _best(fn, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _user_kernels(src: str, *, source: bool = False, **names) -> dict:
    """Define the functions of ``src`` as a user's file would (see the module docstring); ``source``: with its source
    in linecache (the NKI 0.7 kernels, whose loops need it; the NKI 0.1 small-tile kernel reads its carried tile
    after the loop, which the 0.1 scope rule rejects from a file: E027)."""
    ns = dict(names)
    text = textwrap.dedent(src)
    name = f"<sim-bench kernel {next(_files)}>"
    if source:
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    exec(compile(text, name, "exec"), ns)
    return ns


def _small_tile_loop(n: int, loop: str) -> tuple[float, float]:
    """µs per instruction of the NKI 0.1 small-tile loop (a (128, 4) tile carried through tensor_scalar /
    tensor_tensor / tensor_copy) written with ``loop``: (as a loop program run in order, every iteration through the
    op core).  A static_range needs its source (sim/loopproof.py); the sequential_range kernel reads its carried tile
    after the loop, which the 0.1 scope rule rejects from a file (E027), so it runs without."""
    x = np.random.default_rng(0).standard_normal((128, 4)).astype(np.float32)
    k = jit(
        _user_kernels(
            """
        def k(a):
            out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
            t = nl.load(a)
            for _ in LOOP(n):
                u = nisa.tensor_scalar(t, nl.multiply, 1.0001)
                v = nisa.tensor_tensor(u, t, nl.maximum)
                t = nisa.tensor_copy(v)
            nl.store(out, t)
            return out
        """.replace("LOOP", loop),
            source=loop == "nl.static_range",
            nl=nl,
            nisa=nisa,
            n=n,
        )["k"]
    )
    sim = _best(lambda: simulate_kernel(k, x))
    each = _best(lambda: simulate_kernel(k, x, options=SimOptions(loop_programs=False)), repeat=3)
    return sim / (3 * n + 2) * 1e6, each / (3 * n + 2) * 1e6


def small_op_overhead(n: int = 2000) -> tuple[float, float, float]:
    """µs per instruction for tensor_scalar / tensor_tensor / tensor_copy on a (128, 4) tile carried from one
    iteration of a sequential_range to the next: (as a loop program run in order, running every iteration through
    the op core, bare NumPy)."""
    program, each = _small_tile_loop(n, "nl.sequential_range")
    x = np.random.default_rng(0).standard_normal((128, 4)).astype(np.float32)

    def bare():
        t = x.copy()
        for _ in range(n):
            u = t * np.float32(1.0001)
            v = np.maximum(u, t)
            t = v.copy()

    return program, each, _best(bare) / (3 * n) * 1e6


def small_op_overhead_static(n: int = 2000) -> tuple[float, float]:
    """The same small-tile loop as an ``nl.static_range`` (NKI 0.1's unrolled loop, an int index): µs per instruction
    (as a loop program, which its source proves, run in order; running every iteration through the op core)."""
    return _small_tile_loop(n, "nl.static_range")


def loop_body(n: int = 4000) -> tuple[float, float]:
    """µs per instruction of an ``affine_range`` body of loads, small-tile VectorE ops and stores on disjoint (128, 4)
    slices (a loop program: two iterations traced, the rest run at once), with and without loop programs."""
    x = np.random.default_rng(0).standard_normal((128, 4 * n)).astype(np.float32)
    k = jit(
        _user_kernels(
            """
        def k(a):
            out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
            for i in nl.affine_range(n):
                t = nl.load(a[:, i * 4 : i * 4 + 4])
                u = nisa.tensor_scalar(t, nl.multiply, 1.0001)
                v = nisa.tensor_tensor(u, t, nl.maximum)
                nl.store(out[:, i * 4 : i * 4 + 4], value=v)
            return out
        """,
            nl=nl,
            nisa=nisa,
            n=n,
        )["k"]
    )
    instr = 4 * n
    fast = _best(lambda: simulate_kernel(k, x), repeat=3)
    slow = _best(lambda: simulate_kernel(k, x, options=SimOptions(loop_programs=False)), repeat=1)
    return fast / instr * 1e6, slow / instr * 1e6


def matmul_loop(iters: int = 1000) -> tuple[float, float, float]:
    """128x128x512 fp32 nc_matmul accumulated in PSUM, ``iters`` times: (every iteration run, the loop program, NumPy
    ``a.T @ b`` ``iters`` times).  The operands are the same in every iteration, so the program multiplies once
    (a loop-invariant step) and adds the product ``iters`` times: the matmul overhead is the every-iteration run."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)

    k = jit(
        _user_kernels(
            """
        def k(lhsT, rhs):
            out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
            s = nl.load(lhsT)
            m = nl.load(rhs)
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for _ in nl.affine_range(iters):
                acc += nisa.nc_matmul(s, m)
            nl.store(out, nisa.tensor_copy(acc))
            return out
        """,
            nl=nl,
            nisa=nisa,
            iters=iters,
        )["k"]
    )

    sim = _best(lambda: simulate_kernel(k, a, b, options=SimOptions(loop_programs=False)), repeat=2)
    program = _best(lambda: simulate_kernel(k, a, b), repeat=2)

    def bare():
        acc = np.zeros((128, 512), np.float32)
        for _ in range(iters):
            acc += a.T @ b

    ref = _best(bare, repeat=2)
    return sim, program, ref


def small_op_overhead_07(n: int = 2000, loop: str = "nl.sequential_range") -> tuple[float, float]:
    """The same small-tile loop written against NKI 0.7 (dst-first ISA calls into preallocated tiles), its loop
    ``loop`` ("nl.sequential_range" or "range", 0.7's documented loop): µs per instruction (as a loop program run in
    order, running every iteration through the op core)."""
    x = np.random.default_rng(0).standard_normal((128, 4)).astype(np.float32)

    k = nki7.jit(
        _user_kernels(
            """
        def k(a):
            out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
            t = nl.load(a)
            u = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            v = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            for _ in LOOP(n):
                nisa.tensor_scalar(u, t, nl.multiply, 1.0001)
                nisa.tensor_tensor(v, u, t, nl.maximum)
                nisa.tensor_copy(t, v)
            nl.store(out, t)
            return out
        """.replace("LOOP", loop),
            source=True,
            nl=nl7,
            nisa=nisa7,
            n=n,
        )["k"]
    )

    sim = _best(lambda: nki7.simulate(k)(x))
    each = _best(lambda: nki7.simulate(k, options=SimOptions(loop_programs=False))(x), repeat=3)
    return sim / (3 * n + 2) * 1e6, each / (3 * n + 2) * 1e6


def matmul_loop_07(iters: int = 1000) -> float:
    """``iters`` x ``nisa.nc_matmul(acc, s, m)`` (NKI 0.7, auto-accumulating into PSUM)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)

    k = nki7.jit(
        _user_kernels(
            """
        def k(lhsT, rhs):
            out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
            s = nl.load(lhsT)
            m = nl.load(rhs)
            acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            for _ in nl.affine_range(iters):
                nisa.nc_matmul(acc, s, m)
            res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(res, acc)
            nl.store(out, res)
            return out
        """,
            source=True,
            nl=nl7,
            nisa=nisa7,
            iters=iters,
        )["k"]
    )

    return _best(lambda: nki7.simulate(k)(a, b), repeat=2)


# The CS149 part 1 starter's shape (vector_add_tiled with ROW_CHUNK = 1): one element per iteration, two DMA loads,
# the add ``op`` (the starter's is nisa.tensor_scalar(ta, nl.add, tb)), a DMA store; kernel source for _user_kernels
VECTOR_ADD = """
def {name}(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    for m in nl.affine_range(a.shape[0]):
        ta = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[m : m + 1])
        nisa.dma_copy(dst=tb, src=b[m : m + 1])
        r = {op}
        nisa.dma_copy(dst=out[m : m + 1], src=r)
    return out
"""
TENSOR_TENSOR_ADD = "nisa.tensor_tensor(ta, tb, op=nl.add)"


def cost_model_rate(trips: int = 25600, repeat: int = 3) -> tuple[int, float, int]:
    """The cost model's scheduling rate on a long loop: the CS149 part 1 vector add with one element per
    iteration (``trips`` iterations of two DMA loads, a tensor_tensor and a DMA store: 4 x ``trips``
    instructions), traced once; returns (instructions, CPU seconds of ``estimate_trace``, best of
    ``repeat``, schedules per estimate: the modelled one and its alternatives)."""
    k = jit(_user_kernels(VECTOR_ADD.format(name="add_tiled", op=TENSOR_TENSOR_ADD), nl=nl, nisa=nisa)["add_tiled"])
    x = np.random.default_rng(0).standard_normal(trips).astype(np.float32)
    _, tr = trace_of(k, x, x.copy(), numerics=False)
    opts = ModelOptions(mode="benchmark", **build_options(k))
    est = None

    def run():
        nonlocal est
        est = estimate_trace(tr, options=opts, kernel_name="add_tiled", keep=False)

    secs = _best(run, repeat=repeat)
    assert est is not None
    return len(tr.events), secs, 1 + len(est.alternatives)


def main(iters: int = 1000) -> int:
    print(
        "nki_kernels.sim interpreter speed (measured CPU time of this process on this machine, best of 5; "
        "not a Trainium figure)"
    )
    program, per, bare = small_op_overhead()
    print(
        f"  small-tile instruction (128x4 fp32): {per:.1f} us per instruction through the op core "
        f"(bare NumPy for the same math: {bare:.1f} us; overhead {per - bare:.1f} us); {program:.1f} us in a "
        "sequential_range loop program run in order  goal <= 8 us"
    )
    unrolled, unrolled_each = small_op_overhead_static()
    print(
        f"  the same loop as an nl.static_range (unrolled; a program where its source proves the iterations alike): "
        f"{unrolled:.1f} us per instruction as a loop program run in order ({unrolled_each:.1f} us through the op core)"
    )
    fast, slow = loop_body()
    print(
        f"  affine_range body of load / tensor_scalar / tensor_tensor / store on (128, 4) slices: {fast:.1f} us per "
        f"instruction as a loop program ({slow:.1f} us running every iteration)  goal <= 8 us"
    )
    sim, program, ref = matmul_loop(iters)
    as_program = (
        f" (as a loop program {program:.3f} s: its operands do not change, so it multiplies once)" if iters >= 3 else ""
    )
    print(
        f"  {iters} x nc_matmul 128x128x512 fp32 into PSUM, every iteration run: {sim:.3f} s vs bare NumPy {ref:.3f} s "
        f"-> ratio {sim / ref:.2f}x  goal <= 1.2x{as_program}"
    )
    program7, per7 = small_op_overhead_07()
    range7, _ = small_op_overhead_07(loop="range")
    sim7 = matmul_loop_07(iters)
    print(
        f"  NKI 0.7 front end (import nki), same kernels: small-tile {program7:.1f} us per instruction in a loop "
        f"program run in order ({range7:.1f} us written with Python's range), {per7:.1f} us through the op core "
        f"({per7 / per:.2f}x the 0.1 front end's); matmul "
        f"loop {sim7:.3f} s ({sim7 / sim:.2f}x; NKI 0.6 nc_matmul semantics: every iteration runs)  goal <= 1.2x"
    )
    trips = max(32, 25600 * iters // 1000)  # 102,400 instructions at the default --iters
    n, secs, schedules = cost_model_rate(trips)
    print(
        f"  cost model (perf.model.estimate_trace, best of 3): a {trips:,}-iteration affine_range loop of 4 "
        f"instructions (CS149 vector add, 1 element per iteration), {n:,} instructions, in {secs:.2f} s "
        f"({schedules} schedules: the modelled one and its alternatives) -> {n / secs:,.0f} instructions per second"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
