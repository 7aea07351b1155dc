"""``nki-kernels conformance``: public NKI code, run unmodified through the interpreter.

One runner, one result type (:class:`Result`), four suites:

  sdk-tests       NKI 0.1  ``nki/test`` of an aws-neuron-sdk checkout: the documentation examples with
                           golden values (pytest/unittest methods), each method in its own process,
                           ``neuronxcc`` aliased to the interpreter, the files' own xfail/skip markers
                           honoured                                                 (sdk_tests.py)
  sdk-examples    NKI 0.7  ``nki/examples`` kernels that ``import nki``, with inputs and NumPy
                           references written here, compared by ``tolerances.compare``  (sdk07.py)
  sdk-docstrings  NKI 0.7  the code blocks of the ``nki.language`` / ``nki.isa`` docstrings, the
                           language guide and the access-pattern deep dive, with their asserts
                                                                                    (sdk07.py)
  nki-library     NKI 0.7  nki-library's own tests (``-m fast``, its simulation mode, its torch
                           references and tolerances), in a Python that has torch  (nkilib.py)

The SDK suites need ``--sdk PATH`` (or PATH), an aws-neuron-sdk checkout (at 81ce03ae its
``nki/test`` imports ``neuronxcc.nki`` and its ``nki/examples`` and docstrings ``nki``); the library
suite needs ``--nki-library PATH`` and ``--library-python``.  Third-party code is read where it
is; nothing is copied into this project and nothing is written into the checkouts.

Outcomes: ``pass``; ``fail`` (an AssertionError: a golden value or a comparison differs);
``error`` (any other exception: an interpreter error, a missing API, an import error, a timeout);
``xfail`` / ``xpass`` (marked expected to fail, and failed / passed); ``skip`` (marked skipped, or
a snippet that is not runnable as it stands).  Exit status 0 when nothing failed or errored.
"""

from __future__ import annotations

import argparse

from nki_kernels.conformance.results import SUITE_NAMES
from nki_kernels.usage import int_in_range, plain_text, positive_float_at_most


def cmd_conformance(args: argparse.Namespace) -> int:
    from nki_kernels.conformance import runner  # here: the suites load for this command only (CLI startup)

    return runner.cmd_conformance(args)


def add_subcommand(sub: argparse._SubParsersAction) -> None:
    doc = plain_text(__doc__ or "")
    c = sub.add_parser(
        "conformance",
        help="run public NKI code (the SDK's tests, examples and docstrings; nki-library's tests) through the "
        "interpreter",
        description=doc.split("\n\n")[0] + "\n\n" + doc.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("path", nargs="?", metavar="PATH", help="an aws-neuron-sdk checkout (same as --sdk PATH)")
    c.add_argument("--sdk", metavar="PATH", help="an aws-neuron-sdk checkout (the SDK suites)")
    c.add_argument("--nki-library", metavar="PATH", help="an aws-neuron/nki-library checkout (the nki-library suite)")
    c.add_argument(
        "--library-python",
        metavar="PYTHON",
        help="a Python with torch, numpy, ml_dtypes and pytest for the nki-library suite (default: this one)",
    )
    c.add_argument(
        "--suite",
        action="append",
        choices=SUITE_NAMES,
        help="run only this suite (repeatable; default: every suite whose checkout is given)",
    )
    c.add_argument("--json", metavar="FILE", help="also write every result (with tracebacks) to FILE")
    c.add_argument(
        "--timeout",
        type=positive_float_at_most(86_400.0),
        default=300.0,
        help="seconds per process: an sdk-tests method or an nki-library test file (default 300, at most a day)",
    )
    c.add_argument(
        "--jobs",
        type=int_in_range(1, 64),
        default=1,
        help="sdk-tests processes / nki-library test files at a time, 1..64 (default 1)",
    )
    c.add_argument("-k", metavar="SUBSTRING", help="only tests whose id contains SUBSTRING")
    c.add_argument(
        "--only",
        action="append",
        metavar="SUBSTRING",
        help="nki-library: only test files whose path contains SUBSTRING (repeatable)",
    )
    c.set_defaults(func=cmd_conformance)
