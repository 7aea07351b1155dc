"""Reversible ``sys.modules`` aliases: what makes unmodified ``import neuronxcc.nki`` (NKI 0.1)
or ``import nki`` (NKI 0.6/0.7) code resolve to the interpreter.

Entries go straight into ``sys.modules``, which the import system consults before any installed
distribution, so an alias wins over PyPI's placeholder packages of the same name.  Whatever was
in ``sys.modules`` under those names before is restored by ``uninstall()`` (or on leaving the
``with`` block).  Subclasses name the modules (``modules()``) and may add side effects
(``_install_extra`` / ``_uninstall_extra``).
"""

from __future__ import annotations

import sys
from typing import Literal


class ModuleAlias:
    """Register ``modules()`` in ``sys.modules`` until ``uninstall()``; also a context manager."""

    def modules(self) -> dict:
        raise NotImplementedError

    def __init__(self):
        mods = self.modules()
        self._saved = {n: sys.modules.get(n) for n in mods}
        sys.modules.update(mods)
        self._install_extra()
        self.installed = True

    def _install_extra(self) -> None:
        pass

    def _uninstall_extra(self) -> None:
        pass

    def uninstall(self) -> None:
        if not self.installed:
            return
        self._uninstall_extra()
        for n, m in self._saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
        self.installed = False

    def __enter__(self) -> ModuleAlias:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.uninstall()
        return False
