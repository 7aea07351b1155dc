"""Poison with provenance: the first read of never-written memory names the
instruction, the tensor and the line that allocated it, once per tensor; an on-chip tile
returned from a kernel points at the user's `return` line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nki_kernels.sim import SimOptions, SimWarning, nisa, nki, nl, simulate_kernel

F32 = np.float32
X = np.ones((128, 8), F32)
_SRC = open(__file__).read().splitlines()


def line_of(tag):
    (n,) = [i + 1 for i, l in enumerate(_SRC) if l.rstrip().endswith(f"# <- {tag}")]
    return n


def test_first_read_of_never_written_memory_names_instruction_tensor_and_allocation():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf, name="acc")  # <- alloc
        acc[:, 0:4] = nl.load(a[:, 0:4])
        r = nisa.tensor_scalar(acc, np.multiply, 2.0)  # <- first_read
        r2 = nisa.tensor_scalar(acc, np.add, 1.0)  # a second read: no second warning
        nl.store(out, nl.add(r, r2))
        return out

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = simulate_kernel(k, X)
    msgs = [str(x.message) for x in w if issubclass(x.category, SimWarning) and "never-written" in str(x.message)]
    assert len(msgs) == 1, msgs
    m = msgs[0]
    assert "tensor_scalar" in m and "`acc`" in m and f"allocated at test_sim_poison.py:{line_of('alloc')}" in m
    assert m.endswith(f"at test_sim_poison.py:{line_of('first_read')}")
    assert (w[0].filename, w[0].lineno)[1] == line_of("first_read")
    assert np.all(np.isnan(out[:, 4:])) and np.all(out[:, :4] == 2 + 2)


def test_fully_written_tiles_do_not_warn():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        t[:, 0:4] = nl.load(a[:, 0:4])
        t[:, 4:8] = nl.load(a[:, 4:8])
        nl.store(out, nisa.tensor_copy(t))
        return out

    np.testing.assert_array_equal(simulate_kernel(k, X), X)  # SimWarning is an error in this suite


def test_a_computed_nan_is_not_poison():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        t[...] = nl.load(a)
        nl.store(out, nisa.tensor_copy(t))
        return out

    x = np.full((128, 8), np.nan, F32)
    assert np.all(np.isnan(simulate_kernel(k, x)))  # no warning: the kernel wrote NaN


def test_sbuf_tile_returned_points_at_the_return_line():
    @nki.jit
    def k(a):
        t = nl.load(a)
        return nl.add(t, 1.0)  # <- ret

    with pytest.warns(SimWarning) as rec:
        simulate_kernel(k, X)
    assert any(r.lineno == line_of("ret") and r.filename == __file__ for r in rec)
    with pytest.raises(TypeError) as ei:
        simulate_kernel(k, X, options=SimOptions(strict=True))
    assert ei.value.code == "E007" and ei.value.line == line_of("ret")


def test_reading_the_masked_out_part_of_a_result_warns():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.load(a)
        r = nisa.tensor_scalar(t, np.multiply, 2.0, mask=(i_p < 64))  # <- masked_result
        nl.store(out, r)
        return out

    with pytest.warns(SimWarning, match=f"allocated at test_sim_poison.py:{line_of('masked_result')}"):
        out = simulate_kernel(k, X)
    assert np.all(out[:64] == 2) and np.all(np.isnan(out[64:]))
