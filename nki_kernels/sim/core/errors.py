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
import types

# the interpreter's package directory (nki_kernels/sim): frames below it are not the user's
_SIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def trim_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """A traceback without the interpreter's own frames, so a user error ends at the user's
    line.  ``NKI_SIM_FULL_TRACEBACK=1`` keeps every frame (for debugging the interpreter)."""
    if os.environ.get("NKI_SIM_FULL_TRACEBACK", "") not in ("", "0"):
        return tb
    frames = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_SIM_DIR):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def user_frame() -> types.FrameType | None:
    """The innermost stack frame that is not inside nki_kernels.sim (the kernel line)."""
    f: types.FrameType | None = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_SIM_DIR):
        f = f.f_back
    return f


def user_location() -> tuple[str, int]:
    f = user_frame()
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


class SimError(Exception):
    """Base of every coded interpreter error.  ``.code`` is the E-code, ``.where`` file:line.

    The code must be in :data:`CODES` and the instance of the class listed there (checked here,
    so every raise site agrees with the table and the README's error-code table)."""

    code = "E000"

    def __init__(
        self,
        code: str,
        op: str,
        arg: str | None,
        what: str,
        fix: str | None = None,
        got: object = None,
        limit: object = None,
        where: tuple[str, int] | None = None,
    ):
        entry = CODES.get(code)
        if entry is None or not isinstance(self, entry[0]):
            raise RuntimeError(
                f"nki_kernels.sim internal error: {type(self).__name__}({code!r}) does not match "
                f"the error-code table ({entry[0].__name__ if entry else 'unknown code'})"
            )
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


# The one table of error codes: code -> (exception class, title).  The README's "Error codes"
# table lists the same codes, classes and titles (simulator_tests/test_sim_error_codes.py).
CODES: dict[str, tuple[type, str]] = {
    "E001": (SimValueError, "partition dimension > 128"),
    "E002": (SimValueError, "operands' partition counts differ"),
    "E003": (SimValueError, "nc_matmul limits"),
    "E004": (SimValueError, "a PSUM tile over one 2 KiB bank per partition"),
    "E005": (SimValueError, "live PSUM over 16 KiB per partition"),
    "E006": (SimValueError, "live SBUF over capacity"),
    "E007": (SimTypeError, "operand in the wrong memory space"),
    "E008": (SimIndexError, "out-of-range index or bad index kind"),
    "E009": (SimTypeError, "illegal dtype for an instruction"),
    "E010": (SimTypeError, "not a tile"),
    "E011": (SimValueError, "shape mismatch"),
    "E012": (SimTypeError, "write to an immutable kernel input"),
    "E013": (NKISyntaxError, "HBM tensor misuse"),
    "E014": (NKISyntaxError, "bad index expression"),
    "E015": (SimValueError, "dynamic control flow or bad mask"),
    "E016": (SimValueError, "a returned output never written"),
    "E017": (SimIndexError, "program_id axis outside the grid"),
    "E018": (SimValueError, "unsupported dtype"),
    "E019": (SimRuntimeError, "NKI API outside a kernel"),
    "E020": (SimValueError, "transpose and statistics limits"),
    "E021": (NKISyntaxError, "op not supported by the instruction"),
    "E022": (SimNotImplementedError, "reshape of a non-contiguous view"),
    "E023": (SimValueError, "illegal reduction axis"),
    "E024": (SimValueError, "hardware-unproven construct under strict"),
    "E025": (SimValueError, "illegal engine for the op or instruction"),
    "E026": (SimValueError, "illegal SBUF/PSUM access pattern"),
    "E027": (NKISyntaxError, "tensor used out of its scope"),
    "E028": (NKISyntaxError, "symbolic loop index used where Python needs an int"),
    "E029": (SimValueError, "iteration race"),
    "E030": (NKISyntaxError, "direct-allocation rule"),
    "E031": (SimRuntimeError, "instruction cap reached"),
    "E032": (SimRuntimeError, "unmatched sendrecv or collective"),
    "E099": (SimRuntimeError, "needs a Neuron device"),
    "E100": (SimNotImplementedError, "not implemented in the interpreter"),
}


class SimWarning(UserWarning):
    """Non-fatal findings: `+=` outside PSUM accumulation, deprecated block dims, ..."""


def partition_error(
    api: str, arg: str | None, n: int, fix: str = "Split the partition axis into tiles of nl.tile_size.pmax (128)"
) -> SimValueError:
    """E001 with NKI's own wording (spec §3 err_num_partition_exceed_arch_limit)."""
    return SimValueError(
        "E001", api, arg, f"number of partitions {n} exceed architecture limitation of 128", fix, got=n, limit=128
    )


def psum_bank_error(api: str, arg: str | None, what: str, per_partition: int) -> SimValueError:
    """E004: a PSUM tile must fit one 2 KiB bank per partition (spec §12)."""
    return SimValueError(
        "E004",
        api,
        arg,
        f"{what} does not fit one 2 KiB PSUM bank per partition ({per_partition} B per partition)",
        "Use at most 512 fp32 (nl.tile_size.psum_fmax) per partition per PSUM tile",
        got=per_partition,
        limit=2048,
    )


def not_implemented(api: str) -> SimNotImplementedError:
    return SimNotImplementedError(
        "E100",
        api,
        None,
        f"{api} is not implemented in nki_kernels.sim",
        "Open an issue or avoid this API; see README 'API coverage' for what is supported",
    )


def instruction_cap(api: str, cap: int) -> SimRuntimeError:
    """E031: the run went past ``SimOptions.max_instructions`` (a runaway loop, or a kernel bigger
    than the default cap).  No source: a limit of the interpreter's own, stated in the README."""
    return SimRuntimeError(
        "E031",
        api,
        None,
        f"the run executed more than {cap:,} instructions (SimOptions.max_instructions), a runaway loop? "
        "Stopped before its trace fills this machine's memory",
        f"If the kernel is meant to be this long, raise the cap: SimOptions(max_instructions=...), "
        f"NKI_SIM_OPTIONS=max_instructions={cap * 10} or nki-kernels run/profile --max-instructions {cap * 10}",
        got=cap + 1,
        limit=cap,
    )


def needs_device(api: str) -> SimRuntimeError:
    estimate = (
        "; `nki-kernels run --estimate-benchmark FILE` (the flag before the file) makes nki.benchmark return "
        "cost-model ESTIMATES and nki.baremetal simulate"
        if api in ("nki.benchmark", "nki.baremetal")
        else ""
    )
    return SimRuntimeError(
        "E099",
        api,
        None,
        f"{api} needs a Neuron device (Trainium) and the Neuron SDK",
        f"Use nki.simulate_kernel(kernel, *args) here{estimate}; or run scripts/run_hw.sh on a trn2 instance",
    )
