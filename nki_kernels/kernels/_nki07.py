"""What the NKI 0.7 kernels (``*_nki07.py``) share: the host entry and input checks.

**Why a host entry.**  From NKI 0.3 on, a ``@nki.jit`` function is not run as Python: the NKI
compiler parses it and everything it calls (all functions are inlined, classes must inherit
``nl.NKIObject``; ``nki/deep-dives/nki-compiler.rst``, ``nki/get-started/nki-language-guide.rst``
at aws-neuron-sdk 81ce03ae).  The tiling plans shared with the NKI 0.1 kernels are ordinary
Python (frozen dataclasses, sets, ``sorted``), so the 0.7 kernels do not call them inside the
kernel.  Each public 0.7 kernel is a :class:`HostEntry`: plain Python that checks the inputs
(the same ValueErrors as the 0.1 kernels, before any instruction), computes the shared plan
and passes the kernel only ints, bools and tuples of them, in an ``nl.NKIObject`` (passing
such objects as kernel arguments is documented in the language guide, "Class Support").

``entry(*args, **kwargs)`` runs the kernel; ``entry.kernel`` is the ``@nki.jit`` function and
``entry.prepare(*args, **kwargs)`` returns the ``(args, kwargs)`` it is called with, so
``nki.simulate(entry.kernel)(*a, **kw)`` runs the same thing in the official simulator.
``entry[lnc]`` launches at ``lnc`` logical cores.

The shared checks read ``.shape``/``.dtype``; the arguments are NumPy arrays, torch tensors or
NKI tensors depending on the caller, so :func:`host_spec` hands them a NumPy description, the
dtype found by name (``str(dtype)``, as nki-library compares dtypes: ``core/utils/allocator.py``
``sizeinbytes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nki_kernels.kernels.registry import HostSpec, dtype_name, np_dtype


def host_spec(t: Any) -> Any:
    """``HostSpec`` of an array-like argument; anything else unchanged, so the shared checks
    reject a list or a float with the same ValueError as for the 0.1 kernel."""
    if not (hasattr(t, "shape") and hasattr(t, "dtype")):
        return t
    name = dtype_name(t.dtype)
    try:
        dt = np_dtype(name)
    except TypeError:
        dt = name
    return HostSpec(tuple(int(s) for s in t.shape), dt)


class HostEntry:
    """A 0.7 kernel's public entry: ``prepare`` on the host, then the ``@nki.jit`` kernel."""

    nki_api = "0.7"  # how the cost model (perf.model.trace_of) tells a 0.7 kernel

    def __init__(
        self,
        prepare: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]],
        kernel: Any,
        name: str,
        doc: str | None = None,
    ) -> None:
        self.prepare, self.kernel = prepare, kernel
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc
        self.__wrapped__ = kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        a, kw = self.prepare(*args, **kwargs)
        return self.kernel(*a, **kw)

    def __getitem__(self, lnc: int) -> HostEntry:
        return HostEntry(self.prepare, self.kernel[lnc], self.__name__, self.__doc__)

    def __repr__(self) -> str:
        return f"<NKI 0.7 kernel {self.__name__} (host entry)>"
