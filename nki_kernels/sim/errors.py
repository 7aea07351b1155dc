"""Coded errors of the interpreter.

Every user-facing failure is one of these classes, raised with a message of the form

    [E001] ndarray(shape): number of partitions 256 exceed architecture limitation of 128.
    got 256, limit 128. Split the partition axis into tiles of nl.tile_size.pmax (128). at my_kernel.py:12

i.e. code, op(argument), what NKI itself would say (where the spec gives a stem), got vs
limit, one fix, and the user's source line (the first stack frame outside nki_kernels.sim).
The classes subclass the builtin exception the real toolchain raises (ValueError,
TypeError, IndexError, RuntimeError, NotImplementedError), so ``except ValueError`` code
written for real NKI keeps working.  The README has the table of codes.
"""
from __future__ import annotations

import os
import sys

_SIM_DIR = os.path.dirname(os.path.abspath(__file__))


def user_frame():
    """The innermost stack frame that is not inside nki_kernels.sim (the kernel line)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_SIM_DIR):
        f = f.f_back
    return f


def user_location() -> tuple[str, int]:
    f = user_frame()
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


class SimError(Exception):
    """Base of every coded interpreter error.  ``.code`` is the E-code, ``.where`` file:line."""
    code = "E000"

    def __init__(self, code: str, op: str, arg: str | None, what: str, fix: str | None = None,
                 got=None, limit=None, where: tuple[str, int] | None = None):
        self.code, self.op, self.arg = code, op, arg
        file, line = where if where is not None else user_location()
        self.where = f"{os.path.basename(file)}:{line}"
        self.file, self.line = file, line
        head = f"[{code}] {op}({arg})" if arg else f"[{code}] {op}"
        parts = [f"{head}: {what.rstrip('.')}."]
        if got is not None or limit is not None:
            parts.append(f"got {got}, limit {limit}.")
        if fix:
            parts.append(fix.rstrip(".") + ".")
        parts.append(f"at {self.where}")
        super().__init__(" ".join(parts))


class SimValueError(SimError, ValueError):
    pass


class SimTypeError(SimError, TypeError):
    pass


class SimIndexError(SimError, IndexError):
    pass


class SimRuntimeError(SimError, RuntimeError):
    pass


class NKISyntaxError(SimError, ValueError):
    """What neuronxcc raises for kernels that do not trace (its own class is module-local).

    Subclasses ValueError here so callers can catch it without importing the interpreter.
    """


class SimNotImplementedError(SimError, NotImplementedError):
    pass


class SimWarning(UserWarning):
    """Non-fatal findings: `+=` outside PSUM accumulation, deprecated block dims, ..."""


def partition_error(api: str, arg, n: int, fix: str = "Split the partition axis into tiles of "
                    "nl.tile_size.pmax (128)") -> SimValueError:
    """E001 with NKI's own wording (spec §3 err_num_partition_exceed_arch_limit)."""
    return SimValueError("E001", api, arg, f"number of partitions {n} exceed architecture limitation of 128",
                         fix, got=n, limit=128)


def psum_bank_error(api: str, arg, what: str, per_partition: int) -> SimValueError:
    """E004: a PSUM tile must fit one 2 KiB bank per partition (spec §12)."""
    return SimValueError("E004", api, arg, f"{what} does not fit one 2 KiB PSUM bank per partition "
                         f"({per_partition} B per partition)",
                         "Use at most 512 fp32 (nl.tile_size.psum_fmax) per partition per PSUM tile",
                         got=per_partition, limit=2048)


def not_implemented(api: str) -> SimNotImplementedError:
    return SimNotImplementedError(
        "E100", api, None, f"{api} is not implemented in nki_kernels.sim",
        "Open an issue or avoid this API; see README 'API coverage' for what is supported")


def needs_device(api: str) -> SimRuntimeError:
    return SimRuntimeError(
        "E099", api, None, f"{api} needs a Neuron device (Trainium) and the Neuron SDK",
        "Use nki.simulate_kernel(kernel, *args) here, or run scripts/run_hw.sh on a trn2 instance")
