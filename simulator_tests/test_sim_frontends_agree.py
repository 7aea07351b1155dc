"""One op core, two front ends: every NKI 0.1 instruction and its NKI 0.7 twin record the same
instruction -- identical payloads, the same engine, region sizes, partitions, free elements, flops and
bytes -- on a grid of shapes and dtypes.  (The FP8 double-row matmul was once recorded two ways, so
the same instruction was costed differently depending on the front end.)  And the layering that keeps
them so: neither front end imports the other, and the interpreter imports only at the top of its files."""

from __future__ import annotations

import ast
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import nisa as nisa1
from nki_kernels.sim import nki as nki1
from nki_kernels.sim import nl as nl1
from nki_kernels.sim import trace_kernel
from nki_kernels.sim.nki07 import isa as nisa7
from nki_kernels.sim.nki07 import language as nl7
from nki_kernels.sim.nki07 import nki as nki7
from nki_kernels.sim.trace import PAYLOADS

F32 = np.float32
SHAPES = [(128, 512), (64, 96), (32, 8), (1, 1)]
SIM = Path(nki1.__file__).resolve().parents[1]  # nki_kernels/sim


def _imports(path: Path, package: str):
    """(absolute module, inside a function) of every import statement of one file, at any depth."""
    tree = ast.parse(path.read_text(), str(path))
    local = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            names = [".".join([*base, node.module] if node.module else base)]
        else:
            continue
        for name in names:
            yield name, id(node) in local


@pytest.mark.parametrize("front, sibling", [("nki01", "nki07"), ("nki07", "nki01")])
def test_neither_front_end_imports_the_other(front, sibling):
    """The front ends are siblings over the core: no import of one from the other, at any depth (a
    function-local one once slipped through)."""
    package = f"nki_kernels.sim.{front}"
    files = sorted((SIM / front).glob("*.py"))
    assert len(files) >= 8, files
    for path in files:
        for name, _ in _imports(path, package):
            assert not name.startswith(f"nki_kernels.sim.{sibling}"), f"{path.name} imports {name}"


def test_the_interpreter_imports_only_at_the_top_of_its_files():
    """docs/architecture.md invariant: no function-local imports in nki_kernels/sim, so each module's
    dependencies (and the layering above) are visible in its first lines."""
    files = sorted(SIM.rglob("*.py"))
    assert len(files) >= 40, files
    for path in files:
        package = ".".join(("nki_kernels", *path.relative_to(SIM.parent).parent.parts))
        inside = [name for name, in_function in _imports(path, package) if in_function]
        assert not inside, f"{path.relative_to(SIM.parent)} imports {inside} inside a function"


def _fields(ev):
    """What must agree between the front ends (the api string names the NKI call and differs)."""
    return (
        ev.op,
        ev.engine,
        ev.payload,
        ev.partitions,
        ev.free_elems,
        ev.flops,
        ev.bytes,
        ev.out_dtype,
        tuple(r.hi - r.lo for r in ev.reads),
        tuple(r.hi - r.lo for r in ev.writes),
        tuple(r.buffer for r in ev.reads),
        tuple(r.buffer for r in ev.writes),
    )


def _one(trace, op):
    evs = [e for e in trace.events if e.op == op]
    assert len(evs) == 1, [e.op for e in trace.events]
    assert type(evs[0].payload) in PAYLOADS
    return evs[0]


def _first(trace, op):
    """The kernel body's instruction: the first ``op`` (the 0.7 kernel copies its result out with a
    second tensor_copy)."""
    evs = [e for e in trace.events if e.op == op]
    assert evs and type(evs[0].payload) in PAYLOADS, [e.op for e in trace.events]
    return evs[0]


def _run01(body, x, dtype, out_shape, buf="sbuf"):
    @nki1.jit
    def k(a):
        t = nl1.load(a) if dtype == F32 else nl1.load(a, dtype=dtype)
        dst = nl1.ndarray(out_shape, nl1.float32 if buf == "psum" else dtype, buffer=getattr(nl1, buf))
        body(dst, t)
        out = nl1.ndarray(out_shape, nl1.float32, buffer=nl1.shared_hbm)
        nl1.store(out, dst)
        return out

    return trace_kernel(k, x)[1]


def _run07(body, x, dtype, out_shape, buf="sbuf"):
    @nki7.jit
    def k(a):
        t = nl7.ndarray(a.shape, dtype, buffer=nl7.sbuf)
        nisa7.dma_copy(dst=t, src=a)
        dst = nl7.ndarray(out_shape, nl7.float32 if buf == "psum" else dtype, buffer=getattr(nl7, buf))
        body(dst, t)
        out = nl7.ndarray(out_shape, nl7.float32, buffer=nl7.shared_hbm)
        res = nl7.ndarray(out_shape, nl7.float32, buffer=nl7.sbuf)
        nisa7.tensor_copy(dst=res, src=dst)
        nisa7.dma_copy(dst=out, src=res)
        return out

    return nki7.trace(k, x)[1]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


# (name, 0.1 body, 0.7 body, op recorded, output shape of (P, F), output buffer)
def _same(shape):
    return shape


CASES = [
    (
        "tensor_copy",
        lambda d, t: d.__setitem__(..., nisa1.tensor_copy(t)),
        lambda d, t: nisa7.tensor_copy(dst=d, src=t),
        "tensor_copy",
        _same,
        "sbuf",
    ),
    (
        "tensor_scalar",
        lambda d, t: d.__setitem__(..., nisa1.tensor_scalar(t, np.multiply, 2.0, op1=np.add, operand1=1.0)),
        lambda d, t: nisa7.tensor_scalar(d, t, nl7.multiply, 2.0, op1=nl7.add, operand1=1.0),
        "tensor_scalar",
        _same,
        "sbuf",
    ),
    (
        "tensor_tensor",
        lambda d, t: d.__setitem__(..., nisa1.tensor_tensor(t, t, np.maximum)),
        lambda d, t: nisa7.tensor_tensor(d, t, t, nl7.maximum),
        "tensor_tensor",
        _same,
        "sbuf",
    ),
    (
        "activation",
        lambda d, t: d.__setitem__(..., nisa1.activation(np.exp, t, scale=0.5)),
        lambda d, t: nisa7.activation(d, nl7.exp, t, scale=0.5),
        "activation",
        _same,
        "sbuf",
    ),
    (
        "reciprocal",
        lambda d, t: d.__setitem__(..., nisa1.reciprocal(t)),
        lambda d, t: nisa7.reciprocal(d, t),
        "reciprocal",
        _same,
        "sbuf",
    ),
    (
        "tensor_reduce",
        lambda d, t: d.__setitem__(..., nisa1.tensor_reduce(np.add, t, axis=1, keepdims=True)),
        lambda d, t: nisa7.tensor_reduce(d, nl7.add, t, axis=1, keepdims=True),
        "tensor_reduce",
        lambda s: (s[0], 1),
        "sbuf",
    ),
    (
        "memset",
        lambda d, t: d.__setitem__(..., nisa1.memset(d.shape, 3.0, d.dtype)),
        lambda d, t: nisa7.memset(d, 3.0),
        "memset",
        _same,
        "sbuf",
    ),
    (
        "nc_transpose_vector",
        lambda d, t: d.__setitem__(..., nisa1.nc_transpose(t[:, 0 : min(32, t.shape[1])], engine=nisa1.vector_engine)),
        lambda d, t: nisa7.nc_transpose(d, t[:, 0 : min(32, t.shape[1])], engine=nisa7.vector_engine),
        "nc_transpose",
        lambda s: (min(32, s[1]), s[0]),
        "sbuf",
    ),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [F32, ml_dtypes.bfloat16], ids=["fp32", "bf16"])
def test_each_instruction_records_the_same_event_in_both_front_ends(case, shape, dtype):
    name, b01, b07, op, out_shape, buf = case
    if name == "nc_transpose_vector" and shape[0] > 32:
        shape = (32, shape[1])
    x = _x(shape)
    o = out_shape(shape)
    e1 = _first(_run01(b01, x, dtype, o, buf), op)
    e7 = _first(_run07(b07, x, dtype, o, buf), op)
    assert _fields(e1) == _fields(e7)


@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (64, 32, 100), (1, 1, 1)])
@pytest.mark.parametrize("dtype", [F32, ml_dtypes.bfloat16], ids=["fp32", "bf16"])
def test_nc_matmul_records_the_same_instruction(K, M, N, dtype):
    x = _x((K, M + N))

    def b01(d, t):
        d[...] = nisa1.nc_matmul(t[:, 0:M], t[:, M : M + N])

    def b07(d, t):
        nisa7.nc_matmul(d, t[:, 0:M], t[:, M : M + N])

    e1 = _one(_run01(b01, x, dtype, (M, N), "psum"), "nc_matmul")
    e7 = _one(_run07(b07, x, dtype, (M, N), "psum"), "nc_matmul")
    assert _fields(e1) == _fields(e7)
    assert (e1.payload.K, e1.payload.M, e1.payload.N) == (K, M, N)


@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (64, 16, 100), (8, 1, 3)])
def test_fp8_double_row_matmul_records_the_same_instruction(K, M, N):
    """The double-row instruction as TensorE sees it: 2K contraction rows on K partitions, N moving
    columns (aws-neuron-sdk 81ce03ae nki/guides/architecture/trainium2_arch.rst)."""
    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (K, 2, M)).astype(F32)
    b = rng.integers(-2, 3, (K, 2, N)).astype(F32)

    @nki1.jit
    def k1(s, m):
        st = nl1.load(s, dtype=nl1.float8_e5m2)
        mv = nl1.load(m, dtype=nl1.float8_e5m2)
        out = nl1.ndarray((M, N), nl1.float32, buffer=nl1.shared_hbm)
        acc = nl1.ndarray((M, N), nl1.float32, buffer=nl1.psum)
        acc[...] = nisa1.nc_matmul(st, mv, perf_mode="double_row_gen3")
        nl1.store(out, acc)
        return out

    @nki7.jit
    def k7(s, m):
        st = nl7.ndarray(s.shape, nl7.float8_e5m2, buffer=nl7.sbuf)
        mv = nl7.ndarray(m.shape, nl7.float8_e5m2, buffer=nl7.sbuf)
        nisa7.dma_copy(dst=st, src=s)
        nisa7.dma_copy(dst=mv, src=m)
        acc = nl7.ndarray((M, N), nl7.float32, buffer=nl7.psum)
        nisa7.nc_matmul(acc, st, mv, perf_mode=nisa7.matmul_perf_mode.double_row)
        res = nl7.ndarray((M, N), nl7.float32, buffer=nl7.sbuf)
        nisa7.tensor_copy(dst=res, src=acc)
        out = nl7.ndarray((M, N), nl7.float32, buffer=nl7.shared_hbm)
        nisa7.dma_copy(dst=out, src=res)
        return out

    o1, t1 = trace_kernel(k1, a, b)
    o7, t7 = nki7.trace(k7, a, b)
    np.testing.assert_array_equal(o1, o7)
    np.testing.assert_array_equal(o1, np.einsum("kli,klj->ij", a, b))
    e1, e7 = _one(t1, "nc_matmul"), _one(t7, "nc_matmul")
    assert _fields(e1) == _fields(e7)
    assert (e1.payload.K, e1.payload.M, e1.payload.N, e1.payload.perf_mode) == (2 * K, M, N, "double_row")
    assert (e1.partitions, e1.free_elems, e1.flops) == (K, N, 2 * (2 * K) * M * N)


@pytest.mark.parametrize("shape", SHAPES)
def test_dma_copy_and_dma_transpose_record_the_same_instruction(shape):
    x = _x(shape)

    @nki1.jit
    def k1(a):
        t = nl1.ndarray(a.shape, nl1.float32, buffer=nl1.sbuf)
        nisa1.dma_copy(dst=t, src=a)
        out = nl1.ndarray(a.shape, nl1.float32, buffer=nl1.shared_hbm)
        nisa1.dma_copy(dst=out, src=t)
        return out

    @nki7.jit
    def k7(a):
        t = nl7.ndarray(a.shape, nl7.float32, buffer=nl7.sbuf)
        nisa7.dma_copy(dst=t, src=a)
        out = nl7.ndarray(a.shape, nl7.float32, buffer=nl7.shared_hbm)
        nisa7.dma_copy(dst=out, src=t)
        return out

    t1, t7 = trace_kernel(k1, x)[1], nki7.trace(k7, x)[1]
    assert [_fields(e) for e in t1.events] == [_fields(e) for e in t7.events]

    @nki1.jit
    def j1(a):
        t = nl1.load(a)
        tt = nl1.ndarray((shape[1], shape[0]), nl1.float32, buffer=nl1.sbuf) if shape[1] <= 128 else None
        if tt is None:
            return a
        tt[...] = nisa1.dma_transpose(t)
        out = nl1.ndarray(tt.shape, nl1.float32, buffer=nl1.shared_hbm)
        nl1.store(out, tt)
        return out

    @nki7.jit
    def j7(a):
        t = nl7.load(a)
        if shape[1] > 128:
            return a
        tt = nl7.ndarray((shape[1], shape[0]), nl7.float32, buffer=nl7.sbuf)
        nisa7.dma_transpose(tt, t)
        out = nl7.ndarray(tt.shape, nl7.float32, buffer=nl7.shared_hbm)
        nl7.store(out, tt)
        return out

    if shape[1] > 128:
        pytest.skip(reason="a (P, F > 128) source cannot be transposed into a tile")
    t1, t7 = trace_kernel(j1, x)[1], nki7.trace(j7, x)[1]
    assert _fields(_one(t1, "dma_transpose")) == _fields(_one(t7, "dma_transpose"))
