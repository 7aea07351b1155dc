"""The ``nki-kernels`` command's entry point; the subcommands are in :mod:`nki_kernels.commands`.

:func:`main` sets the process up before anything loads NumPy or the interpreter (the commands do,
as they are imported): one BLAS thread unless the user chose otherwise, and signals that stop the
command cleanly, so a Ctrl-C while the commands load stops it like any other.
"""

from __future__ import annotations

import contextlib
import os
import sys

from nki_kernels import environment, lifecycle
from nki_kernels.usage import UsageError, attach_dash_values, fail


def main(argv: list[str] | None = None) -> int:
    """The ``nki-kernels`` command: arguments, then the environment, then the subcommand's own
    checks are validated before any work; each failure is one line on stderr and exit code 2.
    How it stops (signals, a closed pipe, the user's own exceptions): :mod:`nki_kernels.lifecycle`."""
    # Before NumPy loads (the commands, imported below, load it): one BLAS thread unless the user chose otherwise.  The
    # interpreter issues one small GEMM per nc_matmul (<= 128x128x512); a second OpenBLAS thread cost the
    # CS149 harness 30-55% more CPU for a wall time within the noise on an idle machine, and on a busy
    # one its spin-waiting made `verify`'s 224x224 case 10x slower.  dev.py sets the same default.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] != "run":  # run passes everything after FILE to the file unchanged
        argv = attach_dash_values(argv)
    prog = "nki-kernels"
    cmd = next((a for a in argv if not a.startswith("-")), "")  # the subcommand, for a last-resort line
    with lifecycle.signals_stop_the_command(f"{prog} {cmd}".strip()):
        try:
            from nki_kernels.commands import build_parser  # here: after the BLAS default, inside the signal handling

            args = build_parser().parse_args(argv)
            prog = f"nki-kernels {args.cmd}"
            environment.check()
            code = int(args.func(args))
            sys.stdout.flush()  # here, not at exit: a closed pipe is then a BrokenPipeError caught below
            return code
        except (UsageError, environment.EnvironmentUsageError) as exc:
            return fail(prog, exc)
        except lifecycle.UserCodeError as exc:
            return lifecycle.print_user_exception(prog, exc.original)
        except BrokenPipeError:
            return lifecycle.stdout_closed()
        except (KeyboardInterrupt, lifecycle.Interrupted) as exc:
            code, name = lifecycle.interruption(exc) or (130, "")
            with contextlib.suppress(OSError, ValueError):
                print(f"{prog}: interrupted by {name}", file=sys.stderr, flush=True)
            return code
        except Exception as exc:
            if lifecycle.full_traceback_wanted():
                raise
            return lifecycle.internal_error(prog, exc)


if __name__ == "__main__":
    sys.exit(main())
