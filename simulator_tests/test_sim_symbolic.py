"""Symbolic loop indices of the NKI 0.1 front end (nki_kernels/sim/nki01/symbolic.py; docs/nki-0.1-rules.md
section 9): what an index supports (affine arithmetic, subscripts, nl.ds, masks, `if` predicates) and the Python
uses that need an int (E028)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from nki_kernels.sim import SimError, SimOptions, SimWarning, nisa, nki, nl, simulate_kernel
from nki_kernels.sim.nki01.symbolic import Index, Predicate

STRICT = SimOptions(strict=True)


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_index_keeps_value_and_affine_form() -> None:
    i = Index.loop(3, 1)
    j = Index.loop(2, 2)
    e = i * 4 + j - 1
    assert e.v == 13 and e.affine and e.terms == ((1, 4), (2, 1)) and e.const == -1
    assert (-e).v == -13 and (-e).affine
    assert (2 + i).v == 5 and (10 - i).v == 7 and (np.int64(2) * i).v == 6
    assert not (i % 2).affine and not (i // 2).affine and not (i * j).affine
    p = (i < 4) & ~(j > 2)
    assert isinstance(p, Predicate) and p.v and p.affine
    assert not ((i % 2) < 1).affine


def test_affine_uses_run() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 128, 64), nl.float32, buffer=nl.shared_hbm)
        for i0 in nl.affine_range(2):
            for i1 in nl.sequential_range(2):
                i = i0 * 2 + i1
                t = nl.load(a[i, :, nl.ds(0, 64)])
                # a predicated if/elif is a tensor scope: write into `t`, do not rebind it (E027)
                if i > 1:
                    t[...] = nl.multiply(t, 2.0)
                elif i == 1:
                    t[...] = nl.multiply(t, 3.0)
                nl.store(out[i], t)
        return out

    x = _x((4, 128, 64))
    ref = x * np.array([1.0, 3.0, 2.0, 2.0], np.float32)[:, None, None]
    np.testing.assert_allclose(simulate_kernel(k, x), ref)
    np.testing.assert_allclose(simulate_kernel(k, x, options=STRICT), ref)


def test_nested_closure_and_helper_range_are_ints() -> None:
    def helper(n: int) -> list[int]:
        return [q for q in range(n)]

    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        scales = [1.0, 2.0]

        def body(j: int) -> None:
            nl.store(out[j], nl.multiply(nl.load(a[j]), scales[j]))

        for j in helper(2):
            body(j)
        return out

    x = _x((2, 128, 64))
    np.testing.assert_allclose(simulate_kernel(k, x), x * np.array([1.0, 2.0], np.float32)[:, None, None])


@pytest.mark.parametrize("form", ["while", "float", "truediv"])
def test_python_uses_of_an_index_are_e028(form: str) -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            if form == "ternary":
                s = 1.0 if i < 1 else 2.0
            elif form == "while":
                while i < 0:
                    pass
                s = 1.0
            elif form == "bool":
                s = 1.0 + bool(i > 0)
            elif form == "float":
                s = float(i)
            elif form == "in":
                s = 1.0 if i in (0, 1) else 2.0
            else:
                s = i / 2
            nl.store(out[i], nl.multiply(nl.load(a[i]), s))
        return out

    with pytest.raises(SimError, match=r"\[E028\]"):
        simulate_kernel(k, _x((2, 128, 64)))


@pytest.mark.parametrize("form", ["ternary", "bool", "in", "not", "max", "and", "if_index"])
def test_the_truth_value_of_an_index_is_true_as_traced(form: str) -> None:
    """Outside an `if` test the traced index object is true for every iteration (spec corrections turn 4, item
    I): the lenient rule pm.predicate_truth_value -- a warning naming the line, the traced value computed, E028
    under strict."""

    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            if form == "ternary":
                s = 1.0 if i < 1 else 2.0
            elif form == "bool":
                s = 1.0 + bool(i > 0)
            elif form == "in":
                s = 1.0 if i in (0, 5) else 2.0
            elif form == "not":
                s = 2.0 if not (i > 5) else 1.0
            elif form == "max":
                s = 1.0
                i = max(1, i)  # `i > 1` is true as traced: i itself (its concrete value would make both rows 1)
            elif form == "and":
                p = (i < 1) and (i >= 0)  # the second predicate: true in both iterations
                s = 1.0 if p else 2.0
            else:
                s = 1.0 if i else 2.0
            nl.store(out[i], nl.multiply(nl.load(a[i]), s))
        return out

    x = _x((2, 128, 64))
    with pytest.warns(SimWarning, match=r"\[E028 under strict\] pm.predicate_truth_value: the truth value") as w:
        got = simulate_kernel(k, x)
    assert {os.path.basename(r.filename) for r in w if "predicate_truth_value" in str(r.message)} == {
        "test_sim_symbolic.py"
    }
    # as traced: every condition is true, so each iteration takes the branch a true test takes
    scale = {"ternary": 1.0, "bool": 2.0, "in": 1.0, "not": 1.0, "max": 1.0, "and": 1.0, "if_index": 1.0}[form]
    want = x * np.float32(scale)
    assert np.isfinite(got).all() and np.abs(got).max() > 0
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(SimError, match=r"\[E028\] loop index: the truth value"):
        simulate_kernel(k, x, options=STRICT)


def test_program_id_is_an_index() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 128, 64), nl.float32, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        if p < 2:
            nl.store(out[p], nl.load(a[p]))
        else:
            nl.store(out[p], 0.0)
        return out

    x = _x((4, 128, 64))
    ref = x.copy()
    ref[2:] = 0
    np.testing.assert_allclose(simulate_kernel(k[4], x), ref)

    @nki.jit
    def bad(a):
        out = nl.ndarray((4, 128, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out[nl.program_id(0)], nl.load(a[[0, 1, 2, 3][nl.program_id(0)]]))
        return out

    with pytest.raises(SimError, match=r"\[E028\]"):
        simulate_kernel(bad[4], x)


def test_index_bound_warns_by_default_and_is_e028_under_strict() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for j in nl.sequential_range(i + 1):
                nl.store(out[i], nl.load(a[j]))
        return out

    x = _x((2, 128, 64))
    with pytest.warns(SimWarning, match="loop-index bound"):
        simulate_kernel(k, x)
    with pytest.raises(SimError, match=r"\[E028\]"):
        simulate_kernel(k, x, options=STRICT)


def test_masks_with_loop_indices() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((256, 64), nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        for t in nl.affine_range(2):
            row = t * 128 + i_p
            nl.store(out[row, i_f], nl.load(a[row, i_f]), mask=(row < 200) & (t < 2))
            nl.store(out[row, i_f], 0.0, mask=(row >= 200))
        return out

    x = _x((256, 64))
    ref = x.copy()
    ref[200:] = 0
    np.testing.assert_allclose(simulate_kernel(k, x), ref)

    @nki.jit
    def bad(a):
        out = nl.ndarray((256, 64), nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        for t in nl.affine_range(2):
            nl.store(out[t * 128 + i_p, i_f], nl.load(a[t * 128 + i_p, i_f]), mask=(i_p % 2 < 1))
        return out

    with pytest.raises(SimError, match=r"\[E015\].*affine"):
        simulate_kernel(bad, x)


def test_iota_and_affine_select_take_indices() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nisa.iota(i * 64 + nl.arange(64)[None, :] + 0 * nl.arange(128)[:, None], dtype=nl.float32)
            nl.store(out[i], nisa.affine_select(i < 1, t, 0.0))
        return out

    got = simulate_kernel(k, _x((2, 128, 64)))
    np.testing.assert_allclose(got[0], np.broadcast_to(np.arange(64, dtype=np.float32), (128, 64)))
    np.testing.assert_allclose(got[1], 0.0)


def test_tile_position_takes_any_index_expression() -> None:
    # the SDK's golden test_nki_isa_nc_matmul passes ((i % 2) * 64, (j % 2) * 64)
    @nki.jit
    def k(xT, y):
        out = nl.ndarray((4, 64, 256), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            r = nisa.nc_matmul(
                nl.load(xT[i]), nl.load(y[i]), tile_position=((i % 2) * 64, (i % 2) * 64), tile_size=(64, 64)
            )
            nl.store(out[i], nl.copy(r))
        return out

    a, b = _x((4, 64, 64)), _x((4, 64, 256))
    got = simulate_kernel(k, a, b, options=STRICT)
    np.testing.assert_allclose(got, np.einsum("bkm,bkn->bmn", a, b), rtol=1e-4, atol=1e-4)


def test_python_range_of_an_index_in_a_helper_warns() -> None:
    def helper(out, a, n):
        for j in range(n):
            nl.store(out[j], nl.load(a[j]))

    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(1):
            helper(out, a, i + 2)
        return out

    x = _x((2, 128, 64))
    with pytest.warns(SimWarning, match="loop-index bound"):
        np.testing.assert_allclose(simulate_kernel(k, x), x)
    with pytest.raises(SimError, match=r"\[E028\]"):
        simulate_kernel(k, x, options=STRICT)


def test_other_int_operators_give_non_affine_indices() -> None:
    i = Index.loop(5, 1)
    for e in (abs(-i), i & 1, 1 << i, i >> 1, ~i, 3 ^ i, i | 2, divmod(i, 2)[0]):
        assert isinstance(e, Index) and not e.affine
    assert (i & 3).v == 1 and (1 << i).v == 32 and divmod(i, 2)[1].v == 1
    assert (i < 5.5).v and not (i > 5.0).v and (i > 5.0).affine
