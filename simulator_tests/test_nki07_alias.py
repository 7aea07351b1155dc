"""install_nki_alias, `nki-kernels run` API selection and backend.resolve for NKI 0.7."""

from __future__ import annotations

import sys
import textwrap
import types

import numpy as np
import pytest

from nki_kernels import backend, cli, userkernel
from nki_kernels.sim import install_neuronxcc_alias, install_nki_alias, nki07


def _placeholder():
    m = types.ModuleType("nki")
    m.__doc__ = "PyPI placeholder (empty)"
    return m


def test_alias_wins_over_placeholder_and_restores(monkeypatch):
    ph = _placeholder()
    monkeypatch.setitem(sys.modules, "nki", ph)
    with install_nki_alias():
        import nki
        import nki.isa as nisa
        import nki.language as nl
        from nki import typing as nt

        assert nki is nki07.nki and nl is nki07.language and nisa is nki07.isa and nt is nki07.typing
        assert nki07.alias_installed()
    assert sys.modules["nki"] is ph
    assert "nki.language" not in sys.modules
    assert not nki07.alias_installed()


def test_alias_runs_unmodified_code():
    src = textwrap.dedent("""
        import nki
        import nki.isa as nisa
        import nki.language as nl

        @nki.jit
        def scale(a):
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
            nisa.dma_copy(dst=out, src=t)
            return out
    """)
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    with install_nki_alias():
        env = {}
        exec(compile(src, "user_kernel.py", "exec"), env)
        import nki

        out = nki.simulate(env["scale"])(a)
    np.testing.assert_allclose(out, 3 * a, rtol=1e-6)


def test_unimplemented_names_import_but_raise_on_use():
    with install_nki_alias():
        from nki.collectives import all_gather_v  # module-level imports of unmodelled APIs still work
        from nki.isa import nc_matmul_mx
    with pytest.raises(NotImplementedError, match=r"\[E100\] nki.isa.nc_matmul_mx"):
        nc_matmul_mx(None, None, None)
    with pytest.raises(NotImplementedError, match=r"\[E100\] nki.collectives.all_gather_v"):
        all_gather_v([], [], None, None)


def test_both_aliases_coexist():
    with install_neuronxcc_alias(), install_nki_alias():
        import neuronxcc.nki.language as nl01
        import nki.language as nl07

        assert nl01 is not nl07 and nl07 is nki07.language


def test_apis_of_source():
    assert userkernel.apis_of_source("import nki\nimport nki.language as nl\n") == ("0.7",)
    assert userkernel.apis_of_source("from nki import isa\n") == ("0.7",)
    assert userkernel.apis_of_source("import neuronxcc.nki as nki\n") == ("0.1",)
    assert userkernel.apis_of_source("from neuronxcc import nki\nimport nki_kernels\n") == ("0.1",)
    assert userkernel.apis_of_source("import numpy\n") == ()
    assert userkernel.apis_of_source("import nki\nimport neuronxcc.nki\n") == ("0.1", "0.7")
    with pytest.raises(SyntaxError):
        userkernel.apis_of_source("def (")


def test_resolve_07_is_the_interpreter_here():
    b = backend.resolve("0.7")
    assert b.api == "0.7" and b.name == "sim"
    assert b.nki is nki07.nki and b.nl is nki07.language and b.nisa is nki07.isa
    assert backend.resolve("0.1").nl is backend.nl
    with pytest.raises(ValueError, match="allowed API versions"):
        backend.resolve("0.3")


def test_placeholder_never_counts_as_real_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "nki", _placeholder())
    with pytest.raises(ImportError, match="placeholder"):
        backend._real_07()
    with install_nki_alias():
        with pytest.raises(ImportError, match="alias"):
            backend._real_07()


_KERNEL_07 = """
import sys
import numpy as np
import nki
import nki.language as nl

@nki.jit
def double(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), 2.0))
    return out

x = np.arange(12, dtype=np.float32).reshape(3, 4)
assert np.array_equal(double(x), 2 * x)
print("OK07", sys.argv[1:])
"""


def test_cli_run_picks_07_alias_from_imports(tmp_path, capsys):
    f = tmp_path / "k07.py"
    f.write_text(_KERNEL_07)
    assert cli.main(["run", str(f), "a1"]) == 0
    assert "OK07 ['a1']" in capsys.readouterr().out
    assert "nki.language" not in sys.modules or sys.modules["nki.language"] is not nki07.language


def test_cli_run_api_flag(tmp_path, capsys):
    f = tmp_path / "k.py"
    f.write_text("import importlib, sys\nm = importlib.import_module('nki')\nprint('HAS', m.__name__)\n")
    assert cli.main(["run", "--api", "0.7", str(f)]) == 0
    assert "HAS nki_kernels.sim.nki07.nki" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["run", "--api", "0.5", str(f)])
