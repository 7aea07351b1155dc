"""Shared body of the fake ``nki`` packages (``sdk_2_29``, ``sdk_2_32``, ``sdk_2_33``).

No device, no compiler: ``jit(fn)`` returns a ``Kernel`` that calls ``fn`` directly (only
NumPy stand-ins work, see ``kernels/``).  Like the real compiler under
``NEURON_FRAMEWORK_DEBUG=1``, the first call for a set of input shapes writes a NEFF into the
working directory under a name of its own (``fake_<hash>.neff``).  ``kernel[lnc]`` launches at
LNC 1 or 2.  ``simulate(kernel)`` runs the function as well.  Environment:
``FAKE_NKI_CALL_SECONDS`` (sleep per call), ``FAKE_NKI_ZEROS=1`` (return all-zero outputs,
like ``baremetal`` on SDK 2.32, nki-samples#134), ``FAKE_LOG`` (append one line per call).
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any


def _log(line):
    path = os.environ.get("FAKE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def _shape_key(args):
    return tuple(tuple(getattr(a, "shape", ())) for a in args)


class Kernel:
    """What ``@nki.jit`` returns in the fake."""

    def __init__(self, fn: Any, lnc: int = 1, _compiled: set | None = None) -> None:
        self.fn, self.lnc = fn, lnc
        self.__name__ = getattr(fn, "__name__", "kernel")
        self._compiled = set() if _compiled is None else _compiled

    def __getitem__(self, lnc: int) -> Kernel:
        if lnc not in (1, 2):
            raise ValueError(f"fake nki: LNC must be 1 or 2 on trn2, got {lnc!r}")
        return Kernel(self.fn, lnc, self._compiled)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        framework = "torch" if any(type(a).__module__.startswith("torch") for a in args) else "numpy"
        _log(f"nki.jit call {self.__name__} lnc={self.lnc} framework={framework} cwd={os.getcwd()} pid={os.getpid()}")
        time.sleep(float(os.environ.get("FAKE_NKI_CALL_SECONDS", "0")))
        key = (_shape_key(args), self.lnc)
        if key not in self._compiled:
            self._compiled.add(key)
            if os.environ.get("NEURON_FRAMEWORK_DEBUG") == "1":
                digest = hashlib.sha1(repr((self.__name__, key)).encode()).hexdigest()[:10]
                with open(f"fake_{digest}.neff", "w") as f:
                    f.write(f"fake NEFF of {self.__name__} {key}\n")
        out = self.fn(*args, **kwargs)
        if os.environ.get("FAKE_NKI_ZEROS") == "1":
            out = out * 0
        return out


def jit(fn: Any = None, **_kwargs: Any) -> Any:
    return Kernel(fn) if fn is not None else Kernel


def simulate(kernel: Any) -> Any:
    fn = kernel.fn if isinstance(kernel, Kernel) else kernel

    def run(*args, **kwargs):
        _log(f"nki.simulate {getattr(fn, '__name__', 'kernel')} pid={os.getpid()}")
        return fn(*args, **kwargs)

    return run
