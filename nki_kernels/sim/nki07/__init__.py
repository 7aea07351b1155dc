"""NKI 0.6/0.7 (``import nki``): the interpreter's second front end, on the same op core.

    from nki_kernels.sim import install_nki_alias
    with install_nki_alias():
        import nki, nki.language as nl, nki.isa as nisa   # resolve to this package
        ...

Module objects: :mod:`.nki` (``nki``), :mod:`.language`, :mod:`.isa`, :mod:`.typing`,
:mod:`.compiler`.  Semantics and their sources: docs/nki-0.7-spec.md.
"""

from __future__ import annotations

import sys

from ..alias import ModuleAlias
from . import collectives as _collectives
from . import compiler, isa, language, nki, typing  # noqa: F401
from .kernel import Kernel, jit, simulate, trace  # noqa: F401
from .tensor import NkiTensor  # noqa: F401

nl = language
nisa = isa

nki.language, nki.isa, nki.typing, nki.compiler = language, isa, typing, compiler

nki.collectives = _collectives

_MODULES = {
    "nki": nki,
    "nki.language": language,
    "nki.isa": isa,
    "nki.isa.constants": isa.constants,
    "nki.typing": typing,
    "nki.compiler": compiler,
    "nki.collectives": _collectives,
}


class install_nki_alias(ModuleAlias):
    """Register the interpreter as ``nki`` (+ .language, .isa, .typing, .compiler, .collectives).

    Entries are put straight into ``sys.modules``, which the import system consults before any
    installed distribution, so they win over PyPI's placeholder ``nki`` package (and over an
    already-imported one).  Call ``.uninstall()`` or use it as a context manager: whatever was in
    ``sys.modules`` under those names is restored."""

    def modules(self) -> dict:
        nki.__path__ = []  # a package, so `import nki.language` resolves to sys.modules
        nki.__nki_kernels_sim__ = True
        return _MODULES


def alias_installed() -> bool:
    return getattr(sys.modules.get("nki"), "__nki_kernels_sim__", False) and sys.modules.get("nki") is nki
