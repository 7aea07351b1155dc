"""The fast paths of the per-run checkers report exactly what the plain code did: the race log (E029) keeps one
write per tile rewritten in inner loops and still names the first write of the pair; one-term affine forms merge
as the dict-based merge does."""

from __future__ import annotations

import itertools
import os
import warnings

import numpy as np
import pytest

from nki_kernels.sim import SimError, SimOptions, SimWarning, install_neuronxcc_alias, simulate_kernel
from nki_kernels.sim.nki01.symbolic import Index, _merge

with install_neuronxcc_alias(precision=None):
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

F32 = np.float32
STRICT = SimOptions(strict=True)
_HERE = os.path.basename(__file__)


def _line(marker: str) -> int:
    """The line of this file that ends with the comment ``# <marker>``."""
    with open(__file__) as f:
        hits = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def _race(kernel: object, x: np.ndarray, options: SimOptions | None = None) -> str:
    with pytest.raises(SimError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore", SimWarning)
        simulate_kernel(kernel, x, options=options)
    assert e.value.code == "E029"
    return str(e.value)


@nki.jit
def _rewritten_in_inner_loop(a):
    out = nl.ndarray((128, 64), F32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), F32, buffer=nl.sbuf)
    for i in nl.affine_range(3):  # rewritten: outer
        for _j in nl.affine_range(2):  # rewritten: inner
            t[...] = nl.load(a[i])  # rewritten: first
            t[...] = nl.exp(t)
            t[...] = nl.exp(t)
    nl.store(out, t)
    return out


@nki.jit
def _psum_then_shared_copy(a):
    out = nl.ndarray((128, 128), F32, buffer=nl.shared_hbm)
    sb = nl.ndarray((128, 128), F32, buffer=nl.sbuf)
    for _i in nl.affine_range(2):  # psum: outer
        ps = nl.zeros((128, 128), F32, buffer=nl.psum)
        for k in nl.affine_range(2):
            for _kk in nl.affine_range(3):
                t = nl.load(a[k])
                ps += nisa.nc_matmul(t, t)
        sb[...] = nl.copy(ps)  # psum: first
    nl.store(out, sb)
    return out


@nki.jit
def _psum_accumulated_then_overwritten(a):
    out = nl.ndarray((128, 128), F32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 128), F32, buffer=nl.psum)
    for _i in nl.affine_range(2):  # overwritten: outer
        for k in nl.affine_range(2):
            t = nl.load(a[k])
            ps += nisa.nc_matmul(t, t)
        ps[...] = nl.copy(ps)  # overwritten: first
    nl.store(out, nl.copy(ps))
    return out


@nki.jit
def _iadd_in_nested_loops(a):
    out = nl.ndarray((128, 128), F32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 128), F32, buffer=nl.sbuf)
    for _i in nl.affine_range(2):  # iadd: outer
        for k in nl.affine_range(2):  # iadd: inner
            acc += nl.load(a[k])  # iadd: first
            acc += nl.load(a[k])
    nl.store(out, acc)
    return out


def _where(kind: str, loop: str) -> str:
    return f"{kind}: iterations 0 and 1 of the nl.affine_range loop at {_HERE}:{_line(loop)} both write elements of"


@pytest.mark.parametrize("options", [None, STRICT])
def test_a_tile_rewritten_in_inner_loops_races_at_the_inner_loop_first(options: SimOptions | None) -> None:
    x = np.random.default_rng(0).standard_normal((3, 128, 64)).astype(F32)
    msg = _race(_rewritten_in_inner_loop, x, options)
    assert _where("Unexpected output dependencies", "rewritten: inner") in msg
    assert f"(first at {_HERE}:{_line('rewritten: first')})" in msg


@pytest.mark.parametrize("options", [None, STRICT])
def test_psum_accumulation_in_inner_loops_then_a_plain_write(options: SimOptions | None) -> None:
    x = np.random.default_rng(0).standard_normal((2, 128, 128)).astype(F32)
    msg = _race(_psum_then_shared_copy, x, options)
    assert _where("Unexpected output dependencies", "psum: outer") in msg
    assert f"(first at {_HERE}:{_line('psum: first')})" in msg
    msg = _race(_psum_accumulated_then_overwritten, x, options)
    assert _where("Unexpected output dependencies", "overwritten: outer") in msg
    assert f"(first at {_HERE}:{_line('overwritten: first')})" in msg


def test_repeated_reductions_in_nested_loops_warn_once_and_fail_strict() -> None:
    x = np.random.default_rng(0).standard_normal((2, 128, 128)).astype(F32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(simulate_kernel(_iadd_in_nested_loops, x), 4 * x.sum(axis=0), rtol=1e-5)
    races = [str(w.message) for w in caught if "across parallel iterations" in str(w.message)]
    assert len(races) == 1
    assert _where("parallel iterations", "iadd: inner") in races[0]
    msg = _race(_iadd_in_nested_loops, x, STRICT)
    assert _where("parallel iterations", "iadd: inner") in msg
    assert f"(first at {_HERE}:{_line('iadd: first')})" in msg


def _merge_by_dict(a: tuple, b: tuple, sign: int) -> tuple:
    d = dict(a)
    for k, c in b:
        d[k] = d.get(k, 0) + sign * c
    return tuple((k, c) for k, c in sorted(d.items()) if c)


def test_one_term_merge_is_the_dict_merge() -> None:
    for ka, kb in itertools.product([-2, -1, 1, 2, 5], repeat=2):
        for ca, cb in itertools.product([-3, -1, 0, 1, 2], repeat=2):
            for sign in (1, -1):
                a, b = ((ka, ca),), ((kb, cb),)
                assert _merge(a, b, sign) == _merge_by_dict(a, b, sign), (a, b, sign)
    for a, b in [((), ((1, 2),)), (((1, 2), (3, 4)), ((3, -4),)), (((1, 1),), ((0, 1), (2, 1)))]:
        assert _merge(a, b, 1) == _merge_by_dict(a, b, 1)


def test_index_arithmetic_keeps_the_affine_form() -> None:
    i, j = Index(2, ((1, 1),), 0), Index(3, ((2, 1),), 0)
    e = i * 3 + j
    assert (e.v, e.terms, e.const) == (9, ((1, 3), (2, 1)), 0)
    e = i * 128 + i + 7
    assert (e.v, e.terms, e.const) == (265, ((1, 129),), 7)
    e = i - i
    assert (e.v, e.terms, e.const) == (0, (), 0)
    e = i + np.int64(4)
    assert (e.v, e.terms, e.const) == (6, ((1, 1),), 4)
    assert (i * j).terms is None
