"""NKI 0.7 as shipped in SDK 2.33 (NKI 0.7.0): NkiScalar / scalar_load / scalar_store, nisa.topk, the loops
that replaced nl.dynamic_range and `while reg:`, tracing-based specialization (generators, class inheritance),
the LNC-degree check and NKI_COMPILER_FRONTEND.  Each documented error has its bad form (the coded error) and
its fixed twin (runs).  Rule ids and sources: docs/nki-0.7-spec.md."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim import SimOptions, SimWarning
from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki

RNG = np.random.default_rng(233)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for v in ("NKI_COMPILER_FRONTEND", "NEURON_LOGICAL_NC_CONFIG", "NEURON_CC_FLAGS"):
        monkeypatch.delenv(v, raising=False)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check(out, ref, rtol=1e-6, atol=0.0):
    out = np.asarray(out, dtype=np.float64)
    assert out.shape == np.shape(ref)
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


def run(body, *args):
    @nki.jit
    def k(*a):
        body(*a)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a[0][0:1, 0:1])
        return out

    return k(*(args or (rand(4, 4),)))


def raises(exc, code, body, *args):
    with pytest.raises(exc, match=rf"\[{code}\]"):
        run(body, *args)


def scalar_kernel(body):
    """A kernel over a (1, 1) int32 HBM input: ``body(tile)`` returns the NkiScalar to store in the output."""

    @nki.jit
    def k(idx):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=idx)
        r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.scalar_store(r, body(t))
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=r)
        return out

    return k


def one(v):
    return np.array([[v]], np.int32)


# ---- S1-S3: NkiScalar, scalar_load, scalar_store ---------------------------------------------------------
@pytest.mark.parametrize("v", [5, -7, 123456, 2**31 - 1])
def test_scalar_arithmetic_wraps_at_32_bits_like_numpy_int32(v):
    """S1 (NkiScalar page): + - * on a 32-bit scalar wrap (never widen): the stored value is NumPy's int32
    arithmetic of the same expression."""
    k = scalar_kernel(lambda t: (nisa.scalar_load(t) * 4 + 1) * nisa.scalar_load(t) - 3)
    x = np.int32(v)
    with np.errstate(over="ignore"):
        ref = (x * np.int32(4) + np.int32(1)) * x - np.int32(3)
    np.testing.assert_array_equal(k(one(v)), one(ref))


def test_documented_wraparound_values():
    """S1: the NkiScalar page's own examples: 100000 * 100000 is 1410065408, int32 max + 1 is int32 min."""
    k = scalar_kernel(lambda t: nisa.scalar_load(t) * 100000)
    np.testing.assert_array_equal(k(one(100000)), one(1410065408))
    k2 = scalar_kernel(lambda t: 1 + nisa.scalar_load(t))
    np.testing.assert_array_equal(k2(one(2**31 - 1)), one(-(2**31)))


def test_scalar_offset_gathers_a_runtime_row():
    """S4: an NkiScalar is the scalar_offset of an access pattern: row `idx` of an HBM tensor, picked at run
    time, equals NumPy's a[idx]."""

    @nki.jit
    def k(a, idx):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=idx)
        i = nisa.scalar_load(t)
        row = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=a.ap([[a.shape[1], 1], [1, a.shape[1]]], scalar_offset=i + 1, indirect_dim=0))
        out = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=row)
        return out

    a = rand(10, 16)
    for idx in (0, 4, 8):
        check(k(a, one(idx)), a[idx + 1 : idx + 2])


def test_fori_loop_bounded_by_a_scalar_passes_scalars_to_its_body():
    """C2 (SDK 2.33.0 fori_loop): an NkiScalar bound (also an expression of one); with int / scalar bounds the
    body gets an NkiScalar; the kernel sums the first `count - 1` rows like NumPy."""
    seen = []

    @nki.jit
    def k(a, count):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=count)
        acc = nl.zeros((1, a.shape[1]), nl.float32, buffer=nl.sbuf)
        row = nl.ndarray((1, a.shape[1]), nl.float32, buffer=nl.sbuf)

        def body(i):
            seen.append(type(i).__name__)
            nisa.dma_copy(dst=row, src=a.ap([[a.shape[1], 1], [1, a.shape[1]]], scalar_offset=i))
            nisa.tensor_tensor(dst=acc, data1=acc, data2=row, op=nl.add)

        nl.fori_loop(0, nisa.scalar_load(t) - 1, body)
        out = nl.ndarray((1, a.shape[1]), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    a = rand(12, 8)
    check(k(a, one(7)), a[:6].sum(axis=0, keepdims=True), rtol=1e-5)
    assert seen == ["NkiScalar"] * 6


def _store(value_fn, dtype=nl.int32):
    def body(a):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(t, 3)
        r = nl.ndarray((1, 1), dtype=dtype, buffer=nl.sbuf)
        nisa.scalar_store(r, value_fn(nisa.scalar_load(t)))

    return body


def _load(dtype, buffer=nl.sbuf, shape=(1, 1)):
    def body(a):
        t = nl.ndarray(shape, dtype=dtype, buffer=buffer)
        nisa.memset(t, 2)
        nisa.scalar_load(t)

    return body


@pytest.mark.parametrize(
    "bad, good, exc, code",
    [
        (_load(nl.float32), _load(nl.int32), TypeError, "E009"),  # int32 / int64 only
        (_load(nl.uint32), _load(nl.int32), TypeError, "E009"),  # unsigned dtypes are not accepted
        (_load(nl.int32, nl.psum), _load(nl.int32, nl.sbuf), TypeError, "E007"),  # SBUF or HBM
        (_load(nl.int32, shape=(1, 2)), _load(nl.int32, shape=(1, 1)), ValueError, "E011"),  # a 1x1 tensor
    ],
    ids=["float_tile", "unsigned_tile", "psum_tile", "not_1x1"],
)
def test_scalar_load_constraints(bad, good, exc, code):
    """S2 (scalar_load page): the source is a 1x1 nl.int32 / nl.int64 tensor in SBUF or HBM."""
    raises(exc, code, bad)
    run(good)


def test_scalar_store_takes_a_scalar_of_the_tile_width():
    """S3 (scalar_store page): `value` must be an NkiScalar (a Python int is rejected: memset writes constants),
    and dst has the scalar's width (a 64-bit scalar into an int32 tile: E009)."""

    def python_int(a):
        r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.scalar_store(r, 7)

    def memset_int(a):
        r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(r, 7)

    raises(TypeError, "E010", python_int)
    run(memset_int)
    raises(TypeError, "E009", _store(lambda s: nisa.NkiScalar(5, nl.int64)))
    raises(TypeError, "E009", _store(lambda s: s, dtype=nl.int16))
    run(_store(lambda s: s * 2))


def test_scalar_store_writes_the_value():
    """S3: the stored int is the loaded one (the output is compared, not only 'it ran')."""
    k = scalar_kernel(lambda t: nisa.scalar_load(t))
    np.testing.assert_array_equal(k(one(-42)), one(-42))


def test_comparison_result_is_traced_but_unusable():
    """S1 (NkiScalar page): an int32 comparison is traced, but its result cannot be used (E015); the scalar
    itself can."""
    raises(ValueError, "E015", _store(lambda s: s < 4))
    raises(ValueError, "E015", _store(lambda s: (s == 3) + 1))
    run(_store(lambda s: s + 4))


def test_python_control_flow_on_a_scalar_raises_type_error():
    """S1 / C6: a traced scalar has no value while the kernel is specialized: `if s:`, int(s), range(s) raise
    E015 (a TypeError, as the pages say); fori_loop is the construct for a runtime trip count."""

    def branch(a):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(t, 2)
        s = nisa.scalar_load(t)
        if s:
            pass

    def to_int(a):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(t, 2)
        for _ in range(nisa.scalar_load(t)):
            pass

    def counted(a):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(t, 2)
        nl.fori_loop(0, nisa.scalar_load(t), lambda i: None)

    for bad in (branch, to_int):
        with pytest.raises(TypeError, match=r"\[E015\]"):
            run(bad)
    run(counted)


def test_int64_scalar_rules():
    """S1, S4, C2: at 64 bits only +, -, * exist (a comparison or `//` is rejected at compile time: E021), a
    64-bit scalar cannot bound a fori_loop (E009) nor offset an SBUF/PSUM access (E009), operands of two widths
    do not mix (E009); +, -, * and an HBM offset work.  (nl.int64 tiles are not modelled, so the 64-bit scalar is
    constructed directly.)"""
    wide = lambda v: nisa.NkiScalar(v, nl.int64)  # noqa: E731

    raises(ValueError, "E021", lambda a: wide(3) < 4)
    raises(ValueError, "E021", lambda a: wide(3) // 2)
    raises(TypeError, "E009", lambda a: nl.fori_loop(0, wide(2), lambda i: None))
    raises(TypeError, "E009", lambda a: wide(1) + nisa.NkiScalar(1))

    def sbuf_offset(a):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        t.ap([[4, 1], [1, 4]], scalar_offset=wide(1))

    raises(TypeError, "E009", sbuf_offset)
    raises(NotImplementedError, "E100", lambda a: nisa.NkiScalar(3) // 2)  # int32 `//`: not in the pages

    @nki.jit
    def hbm_offset(a):
        row = nl.ndarray((1, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=a.ap([[4, 1], [1, 4]], scalar_offset=wide(2**32 + 3) - 2**32 * 1))
        out = nl.ndarray((1, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=row)
        return out

    a = rand(6, 4)
    check(hbm_offset(a), a[3:4])
    assert (wide(2**62) * 4)._value == 0  # wraps at 64 bits: 2**64 == 0 mod 2**64
    # nl.int64 tiles themselves are not modelled: a coded E018, never a NumPy error
    raises(ValueError, "E018", lambda a: nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf))


def test_scalar_api_needs_the_tracer(monkeypatch):
    """S2, K9: scalar_load / scalar_store are tracer-only; NKI_COMPILER_FRONTEND=custom selects the parser, which
    rejects the call (E021); unset, the same kernel runs."""
    k = scalar_kernel(lambda t: nisa.scalar_load(t) + 1)
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="deprecated"), pytest.raises(ValueError, match=r"\[E021\].*custom"):
        k(one(1))
    monkeypatch.delenv("NKI_COMPILER_FRONTEND")
    np.testing.assert_array_equal(k(one(1)), one(2))


def test_unknown_frontend_value_warns_and_traces(monkeypatch):
    """K9: the 2.33 pages name only NKI_COMPILER_FRONTEND=custom; another value warns and the kernel is traced
    (scalars work)."""
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "fancy")
    k = scalar_kernel(lambda t: nisa.scalar_load(t) * 3)
    with pytest.warns(SimWarning, match="fancy"):
        np.testing.assert_array_equal(k(one(4)), one(12))


# ---- C2-C4, C6: the loops that replaced dynamic_range / `while reg:` -----------------------------------------
def _countdown_kernel(style):
    """Counts a register down from `count` to 0, adding 1 per trip: `while reg:` (0.6 parser) or nl.while_loop."""

    @nki.jit
    def k(count):
        c = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c, src=count)
        n = nl.zeros((1, 1), nl.int32, buffer=nl.sbuf)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c)

        def step(r):
            nisa.tensor_scalar(dst=c, data=c, op0=nl.subtract, operand0=1)
            nisa.tensor_scalar(dst=n, data=n, op0=nl.add, operand0=1)
            nisa.register_load(r, c)
            return r

        if style == "while":
            while reg:
                step(reg)
        else:
            nl.while_loop(reg, step)
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=n)
        return out

    return k


def test_bare_while_on_a_register_removed_while_loop_is_the_fix(monkeypatch):
    """C4, C6 (MIG 0.6 -> 0.7; SDK 2.32 VirtualRegister note): `while reg:` is removed under tracing (E015, a
    TypeError); nl.while_loop counts like NumPy; NKI_COMPILER_FRONTEND=custom still runs the 0.6 form."""
    with pytest.raises(TypeError, match=r"\[E015\].*while_loop"):
        _countdown_kernel("while")(one(5))
    np.testing.assert_array_equal(_countdown_kernel("while_loop")(one(5)), one(5))
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="custom"):
        np.testing.assert_array_equal(_countdown_kernel("while")(one(4)), one(4))


def test_int_of_a_register_raises_under_tracing(monkeypatch):
    """C6: int(reg) / range(reg) raise under tracing (E015, TypeError); under custom they read the value."""

    def body(a):
        reg = nisa.register_alloc(3)
        assert int(reg) == 3 and list(range(reg)) == [0, 1, 2]

    with pytest.raises(TypeError, match=r"\[E015\]"):
        run(body)
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="custom"):
        run(body)


def test_fori_loop_register_bound_gives_a_register_written_by_value(monkeypatch):
    """C2 (SDK 2.33.0 fori_loop): a VirtualRegister bound makes `i` a VirtualRegister, passed by value: writing
    it "has no effect on the loop" -- the 0.6 rule called it read-only, so a SimWarning (E015 under strict and
    under NKI_COMPILER_FRONTEND=custom); the loop still runs its 3 trips."""
    trips = []

    def kernel(a):
        def body(i):
            trips.append(i.value)
            nisa.register_move(i, 100)

        nl.fori_loop(0, nisa.register_alloc(3), body)

    with pytest.warns(SimWarning, match="no effect"):
        run(kernel)
    assert trips == [0, 1, 2]

    @nki.jit
    def strict_k(a):
        kernel(a)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a[0:1, 0:1])
        return out

    with pytest.raises(ValueError, match=r"\[E015\]"):
        nki.simulate(strict_k, options=SimOptions(strict=True))(rand(2, 2))
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="custom"), pytest.raises(ValueError, match=r"\[E015\]"):
        run(kernel)


# ---- I20: nisa.topk ---------------------------------------------------------------------------------------------
def _snake_ref(x, n, k, descending):
    """NumPy reference: per 16-partition group, the snake of the first n elements (element s at partition
    s % 16, column s // 16), its top-k (ties: lower index first), result j at (j % 16, j // 16)."""
    P = x.shape[0]
    kc = -(-k // 16)
    vals = np.zeros((P, kc), np.float32)
    idx = np.zeros((P, kc), np.int64)
    written = np.zeros((P, kc), bool)
    for g in range(P // 16):
        snake = x[16 * g : 16 * g + 16].astype(np.float32).T.reshape(-1)[:n]
        order = np.argsort(-snake, kind="stable")[:k]
        if not descending:
            order = order[::-1]
        for j, s in enumerate(order):
            vals[16 * g + j % 16, j // 16] = snake[s]
            idx[16 * g + j % 16, j // 16] = s
            written[16 * g + j % 16, j // 16] = True
    return vals, idx, written


def _topk_kernel(n, k, sorted_):
    @nki.jit
    def tk(x):
        P, F = x.shape
        src = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        v = nl.ndarray((P, k), dtype=nl.bfloat16, buffer=nl.sbuf)
        ix = nl.ndarray((P, k), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(v, -7.0)
        nisa.memset(ix, 77777)
        nisa.topk(val_dst=v, idx_dst=ix, src=src, n=n, sorted=sorted_)
        o1 = nl.ndarray((P, k), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o2 = nl.ndarray((P, k), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=v)
        nisa.dma_copy(dst=o2, src=ix)
        return o1, o2

    return tk


@pytest.mark.parametrize("n, k, F", [(42, 20, 3), (200, 64, 13), (8, 8, 1), (1000, 100, 70)])
@pytest.mark.parametrize("sorted_", [True, False], ids=["sorted", "ascending"])
def test_topk_matches_numpy_snake_reference(n, k, F, sorted_):
    """I20 (SDK 2.33.0 topk page): 8 independent problems in a 128-partition tile; results in the snake layout
    in the first ceil(k/16) columns; idx_dst holds snake indices; the rest of the outputs is untouched."""
    x = RNG.standard_normal((128, F)).astype(ml_dtypes.bfloat16)
    vals, idxs = _topk_kernel(n, k, sorted_)(x)
    rv, ri, written = _snake_ref(x, n, k, sorted_)
    kc = rv.shape[1]
    got_v = vals[:, :kc].astype(np.float32)
    got_i = idxs[:, :kc].astype(np.int64)
    assert np.all(np.isfinite(got_v)) and np.any(got_v != 0)
    np.testing.assert_array_equal(np.where(written, got_v, 0), rv)
    np.testing.assert_array_equal(np.where(written, got_i, 0), ri)
    # untouched: the slots past k in the last column, and every column past ceil(k/16)
    assert np.all(got_v[~written] == -7.0) and np.all(got_i[~written] == 77777)
    assert np.all(vals[:, kc:].astype(np.float32) == -7.0) and np.all(idxs[:, kc:] == 77777)
    if sorted_:  # rank j at result j: descending along the snake
        first = rv[:16].T.reshape(-1)[:k]
        assert np.all(np.diff(first) <= 0)


def test_topk_event_and_cost():
    """I20: one GpSimdE event per call, its elements per partition the n of the documented cost 4*n + K."""
    from nki_kernels.perf.costs import compute_cost_ns
    from nki_kernels.perf.hardware import TRN2

    x = RNG.standard_normal((32, 4)).astype(ml_dtypes.bfloat16)
    _, trace = nki.trace(_topk_kernel(50, 16, True), x)
    ev = [e for e in trace.events if e.op == "topk"]
    assert len(ev) == 1 and str(ev[0].engine) == "POOL" and ev[0].free_elems == 50
    ns, known = compute_cost_ns(ev[0], TRN2)
    assert known
    ns100, _ = compute_cost_ns(ev[0]._replace(free_elems=100, payload=ev[0].payload._replace(elems=100)), TRN2)
    assert ns100 - ns == pytest.approx(4 * 50 / TRN2.v("pool_clock_ghz"))


def _topk_body(src_dtype=nl.bfloat16, idx_dtype=nl.uint32, P=32, n=40, k=8, F=3, src_buffer=nl.sbuf):
    def body(a):
        src = nl.ndarray((P, F), dtype=src_dtype, buffer=src_buffer)
        nisa.memset(src, 1.0)
        v = nl.ndarray((P, k), dtype=nl.bfloat16, buffer=nl.sbuf)
        ix = nl.ndarray((P, k), dtype=idx_dtype, buffer=nl.sbuf)
        nisa.topk(v, ix, src, n)

    return body


@pytest.mark.parametrize(
    "bad, exc, code",
    [
        (dict(src_dtype=nl.float32), TypeError, "E009"),  # the source is BF16
        (dict(idx_dtype=nl.int32), TypeError, "E009"),  # idx_dst is uint32
        (dict(P=24), ValueError, "E011"),  # partition dim a multiple of 16
        (dict(n=7), ValueError, "E011"),  # 8 <= n < 65536
        (dict(k=41), ValueError, "E011"),  # k <= n
        (dict(F=2), ValueError, "E011"),  # src free dim >= ceil(n / 16)
        (dict(src_buffer=nl.psum), TypeError, "E007"),  # source and outputs in SBUF
    ],
    ids=["src_fp32", "idx_int32", "p24", "n7", "k_gt_n", "src_narrow", "src_psum"],
)
def test_topk_constraints(bad, exc, code):
    """I20 (0.6 docstring constraints, SDK 2.33.0 page): each violation is its coded error; the fixed twin runs."""
    raises(exc, code, _topk_body(**bad))
    run(_topk_body())


# ---- K12: tracing-based specialization ------------------------------------------------------------------------
class _Tiler(nl.NKIObject):
    """A base class of a kernel helper hierarchy (class inheritance, RN 0.7.0)."""

    def __init__(self, rows):
        self.rows = rows

    def tiles(self, n):
        yield from range(0, n, self.rows)  # a generator: its tiles are produced while the kernel is traced

    def op(self, dst, t):
        nisa.tensor_copy(dst=dst, src=t)


class _Scaler(_Tiler):
    def __init__(self, rows, factor):
        super().__init__(rows)
        self.factor = factor

    def op(self, dst, t):
        nisa.tensor_scalar(dst=dst, data=t, op0=nl.multiply, operand0=self.factor)


class _Mixin:
    offset = 0.5


class _ScalerPlus(_Scaler, _Mixin):
    def op(self, dst, t):
        super().op(dst, t)
        nisa.tensor_scalar(dst=dst, data=dst, op0=nl.add, operand0=self.offset)


def _generator_kernel():
    @nki.jit
    def k(a, helper):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for r0 in helper.tiles(a.shape[0]):
            t = nl.ndarray((helper.rows, a.shape[1]), a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[r0 : r0 + helper.rows, :])
            helper.op(t, t)
            nisa.dma_copy(dst=out[r0 : r0 + helper.rows, :], src=t)
        return out

    return k


def test_generators_and_class_inheritance_in_a_kernel():
    """K12 (RN 0.7.0 "Specialization by Python tracing": generators and class inheritance are meta-programming
    that follows Python semantics): a generator of tile offsets and an overriding subclass (with super())
    produce NumPy's result."""
    a = rand(96, 32)
    k = _generator_kernel()
    check(k(a, _Scaler(32, 3.0)), a * 3.0)
    check(k(a, _Tiler(16)), a)


def test_class_with_a_second_base_is_a_warning_under_tracing(monkeypatch):
    """K12: the 0.6 rule "an NKI class inherits from NKIObject and no other class" was the parser's; under
    tracing a kernel argument of such a class warns (E010 under strict) and runs; custom keeps the E010."""
    a = rand(64, 8)
    k = _generator_kernel()
    with pytest.warns(SimWarning, match="_Mixin"):
        check(k(a, _ScalerPlus(32, 2.0)), a * 2.0 + 0.5)
    with pytest.raises(TypeError, match=r"\[E010\]"):
        nki.simulate(k, options=SimOptions(strict=True))(a, _ScalerPlus(32, 2.0))
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    with pytest.warns(SimWarning, match="custom"), pytest.raises(TypeError, match=r"\[E010\]"):
        k(a, _ScalerPlus(32, 2.0))


def test_equality_of_user_classes_follows_python():
    """K12 (announcement "Kernels that use == on user-defined classes can behave differently"): under tracing
    `==` is Python's -- identity unless the class defines __eq__."""
    picked = []

    class Tag(nl.NKIObject):
        def __init__(self, v):
            self.v = v

    class Val(Tag):
        def __eq__(self, o):
            return isinstance(o, Val) and o.v == self.v

        __hash__ = object.__hash__

    def body(a):
        picked.append((Tag(1) == Tag(1), Val(1) == Val(1)))

    run(body)
    assert picked == [(False, True)]


# ---- K10, K11: the LNC degree ------------------------------------------------------------------------------------
def _halves_kernel():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        pid, n = nl.program_id(), nl.num_programs()
        rows = a.shape[0] // n
        t = nl.load(a[pid * rows : (pid + 1) * rows, :])
        nl.store(out[pid * rows : (pid + 1) * rows, :], nl.add(t, float(pid + n)))
        return out

    return k


def test_env_sets_the_lnc_degree_of_a_plain_call(monkeypatch):
    """K10 (SDK 2.33.1 LNC page): NEURON_LOGICAL_NC_CONFIG sets the degree of a kernel called without brackets."""
    a = rand(64, 8)
    k = _halves_kernel()
    check(k(a), a + 1.0)  # unset: LNC=1
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    ref = a + 2.0
    ref[32:] += 1.0
    check(k(a), ref)
    check(nki.simulate(k)(a), ref)


@pytest.mark.parametrize(
    "env, bad, good",
    [
        ({"NEURON_CC_FLAGS": "--lnc=1"}, 2, 1),  # neuronx-cc overridden to LNC=1
        ({"NEURON_CC_FLAGS": "-O1 --logical-nc-config 2"}, 1, 2),  # the long option, space-separated
        ({"NEURON_LOGICAL_NC_CONFIG": "2"}, 1, 2),  # kernel[1] while neuronx-cc uses the variable's 2
    ],
    ids=["cc_lnc1", "cc_long_option", "env2_bracket1"],
)
def test_lnc_mismatch_with_the_compiler_is_rejected(monkeypatch, env, bad, good):
    """K11 (MIG 0.6 -> 0.7; NCC_EVRF066): a kernel whose LNC degree differs from the one neuronx-cc uses is
    rejected (E011); the matching launch runs."""
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    a = rand(64, 8)
    k = _halves_kernel()
    with pytest.raises(ValueError, match=rf"\[E011\].*LNC={bad}.*LNC={good}.*EVRF066"):
        nki.simulate(k[bad])(a)
    ref = a + float(good)
    if good == 2:
        ref[32:] += 1.0
    check(nki.simulate(k[good])(a), ref)


def test_lnc_without_a_declared_compiler_degree_is_not_checked():
    """K11: with no NEURON_CC_FLAGS --lnc and no NEURON_LOGICAL_NC_CONFIG only a graph compilation would pick
    neuronx-cc's degree; simulations of either degree run."""
    a = rand(64, 8)
    k = _halves_kernel()
    check(nki.simulate(k[1])(a), a + 1.0)
    ref = a + 2.0
    ref[32:] += 1.0
    check(nki.simulate(k[2])(a), ref)


def test_unsupported_lnc_env_value(monkeypatch):
    """K10 (LNC page: a degree of 1 or 2): NEURON_LOGICAL_NC_CONFIG=3 is E011; =1 runs."""
    a = rand(64, 8)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "3")
    with pytest.raises(ValueError, match=r"\[E011\].*NEURON_LOGICAL_NC_CONFIG"):
        _halves_kernel()(a)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    check(_halves_kernel()(a), a + 1.0)
