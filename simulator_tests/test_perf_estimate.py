"""``nki_kernels.perf.estimate`` end to end on the interpreter: a user's neuronxcc kernel via
the alias, and the project's kernels on small shapes (all their ops have a cost rule)."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import numpy as np
import pytest

from nki_kernels import sim
from nki_kernels.perf import estimate

pytestmark = pytest.mark.perf

USER_KERNEL = textwrap.dedent("""
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def scale_add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 128):
            x = nl.load(a[i * 128:(i + 1) * 128, :])
            y = nl.load(b[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], nl.add(nl.multiply(x, 2.0), y))
        return out
""")


def test_estimate_runs_a_users_neuronxcc_kernel_through_the_alias(tmp_path, monkeypatch):
    (tmp_path / "perf_user_kernel.py").write_text(USER_KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    a = np.ones((256, 512), np.float32)
    with sim.install_neuronxcc_alias():
        mod = importlib.import_module("perf_user_kernel")
        try:
            e = estimate(mod.scale_add, a, a)
        finally:
            sys.modules.pop("perf_user_kernel", None)
    assert e.dma_count == 6 and e.hbm_bytes == 3 * a.nbytes
    assert e.latency_us > e.floor_us
    assert e.instruction_count.get("DVE", 0) + e.instruction_count.get("ACT", 0) >= 2
    doc = e.chrome_trace()
    lines = {x["args"]["line"] for x in doc["traceEvents"] if x["ph"] == "X" and "line" in x.get("args", {})}
    assert any(line.startswith("perf_user_kernel.py:") for line in lines)
    json.dumps(doc)


def test_project_matmul_small_shape_is_fully_costed():
    import ml_dtypes

    from nki_kernels.kernels.matmul import matmul

    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((256, 256)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    e = estimate(matmul, lhsT, rhs, numerics=False)
    assert e.uncosted_ops == {}
    assert e.matmul_flops == 2 * 256 * 256 * 512
    assert e.mm_dtype == "bfloat16" and 0 < e.mfu < 1
    assert e.engine_busy_us["PE"] >= e.matmul_flops / e.peak_flops * 1e6 * 0.999
