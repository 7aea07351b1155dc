"""The conformance runner: the suites by name, the choice of suites from the command's arguments, the
run and its tables (``nki-kernels conformance``, whose parser is the package's ``add_subcommand``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from nki_kernels.conformance import nkilib, sdk07, sdk_tests
from nki_kernels.conformance.results import BAD, OUTCOMES, SUITE_NAMES, Options, Report, Result
from nki_kernels.usage import UsageError, writable_file, write_atomically


@dataclass(frozen=True)
class Suite:
    """A named set of public NKI code and how to run it."""

    name: str
    api: str
    needs: str  # "sdk" | "nki-library"
    what: str
    run: Callable[[Options, Report], list[Result]]


def _suites() -> dict[str, Suite]:
    return {
        s.name: s
        for s in (
            Suite("sdk-tests", "0.1", "sdk", "the SDK's nki/test examples with golden values", sdk_tests.run_suite),
            Suite("sdk-examples", "0.7", "sdk", "nki/examples kernels vs NumPy references", sdk07.run_examples),
            Suite("sdk-docstrings", "0.7", "sdk", "code blocks of the 0.6 API docstrings and guides", sdk07.run_docs),
            Suite("nki-library", "0.7", "nki-library", "nki-library's own -m fast tests", nkilib.run_suite),
        )
    }


def git_commit(path: str | None) -> str:
    """HEAD of a checkout, or "unknown"."""
    if not path:
        return "unknown"
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def summarize(results: Sequence[Result]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        counts[r.outcome] += 1
    return counts


def per_file(results: Sequence[Result]) -> list[tuple[str, dict[str, int]]]:
    files: dict[str, list[Result]] = {}
    for r in results:
        files.setdefault(os.path.basename(r.file), []).append(r)
    return [(f, summarize(rs)) for f, rs in files.items()]


def format_file_table(results: Sequence[Result]) -> str:
    """Per-file counts as a Markdown table (the README's NKI 0.1 conformance table)."""
    rows = ["| file | methods | pass | fail | error | xfail | other |", "|---|---|---|---|---|---|---|"]
    for f, c in per_file(results):
        other = ", ".join(f"{c[o]} {o}" for o in ("xpass", "skip") if c[o]) or ""
        rows.append(f"| {f} | {sum(c.values())} | {c['pass']} | {c['fail']} | {c['error']} | {c['xfail']} | {other} |")
    return "\n".join(rows)


def format_suite_table(by_suite: dict[str, list[Result]]) -> str:
    """One row per suite: the README's summary table."""
    head = ["suite", "NKI", "tests", *OUTCOMES]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    suites = _suites()
    for name, results in by_suite.items():
        c = summarize(results)
        counts = " | ".join(str(c[o]) for o in OUTCOMES)
        rows.append(f"| {name} | {suites[name].api} | {len(results)} | {counts} |")
    return "\n".join(rows)


def summary_line(name: str, results: Sequence[Result], commit: str, seconds: float) -> str:
    c = summarize(results)
    parts = ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o] or o in ("pass", "fail", "error"))
    return f"{name}: {len(results)} tests: {parts} ({commit[:8]}, {seconds:.0f} s)"


def run_suites(names: Sequence[str], opts: Options, out: Callable[[str], None] = print) -> dict[str, list[Result]]:
    """Run the named suites in order; print one line per result as it comes."""
    suites = _suites()
    by_suite: dict[str, list[Result]] = {}

    def report(r: Result) -> None:
        msg = f"  {r.message.splitlines()[0][:200]}" if r.message and r.outcome != "pass" else ""
        out(f"{r.outcome.upper():6} {r.suite} {r.id.ljust(60)} {r.seconds:6.1f} s{msg}")

    for name in names:
        t0 = time.perf_counter()
        results = suites[name].run(opts, report)  # each suite applies opts.select itself
        by_suite[name] = results
        checkout = opts.nki_library if suites[name].needs == "nki-library" else opts.sdk
        out(summary_line(name, results, git_commit(checkout), time.perf_counter() - t0))
    return by_suite


# ---------------------------------------------------------------------------------------------- the command


def _fail(msg: str) -> int:
    print(f"nki-kernels conformance: {msg}", file=sys.stderr)
    return 2


def _has_sdk_tests(path: str) -> bool:
    try:
        sdk_tests.test_dir(path)
    except FileNotFoundError:
        return False
    return True


def _choose(args: argparse.Namespace) -> tuple[list[str], Options] | str:
    """The suites to run and their options, or why the arguments do not allow it."""
    sdk = args.sdk or args.path
    if args.path and args.sdk and os.path.abspath(args.path) != os.path.abspath(args.sdk):
        return f"PATH {args.path!r} and --sdk {args.sdk!r} disagree; give one"
    for flag, p in (("--sdk" if args.sdk else "PATH", sdk), ("--nki-library", args.nki_library)):
        if p is not None and not os.path.isdir(p):
            return f"{flag} {p!r} is not a directory; expected a local checkout"
    present = {
        "sdk-tests": bool(sdk) and _has_sdk_tests(sdk or ""),
        "sdk-examples": bool(sdk) and os.path.isdir(os.path.join(sdk or "", "nki", "examples")),
        "sdk-docstrings": bool(sdk) and os.path.isdir(os.path.join(sdk or "", "nki", "api")),
        "nki-library": bool(args.nki_library),
    }
    if not sdk and not args.nki_library:
        return (
            "missing PATH: a local checkout of aws-neuron-sdk (PATH or --sdk PATH: its nki/test, nki/examples and "
            "API docstrings are run) and/or --nki-library PATH; e.g. nki-kernels conformance ~/src/aws-neuron-sdk"
        )
    # Default: every suite whose folder the checkouts have; a suite asked for by name must have it.
    wanted = args.suite or [n for n in SUITE_NAMES if present[n]]
    suites = _suites()
    for n in wanted:
        needs = suites[n].needs
        if needs == "sdk" and not sdk:
            return f"suite {n} needs --sdk PATH (an aws-neuron-sdk checkout)"
        if needs == "nki-library" and not args.nki_library:
            return f"suite {n} needs --nki-library PATH (an aws-neuron/nki-library checkout)"
    if "sdk-tests" in wanted or (sdk and not wanted):
        try:
            sdk_tests.test_dir(sdk or "")
        except FileNotFoundError as exc:
            return str(exc)
    for n, folder in (("sdk-examples", "nki/examples"), ("sdk-docstrings", "nki/api")):
        if n in wanted and not present[n]:
            return (
                f"suite {n}: {os.path.join(sdk or '', folder)} is not a directory (an aws-neuron-sdk checkout has it)"
            )
    if args.library_python is not None and not (
        os.path.isfile(args.library_python) and os.access(args.library_python, os.X_OK)
    ):
        return f"--library-python {args.library_python!r} is not an executable file"
    if "nki-library" in wanted and args.nki_library:
        if not nkilib.test_files(args.nki_library):
            where = os.path.join(args.nki_library, "test", "integration")
            return (
                f"--nki-library {args.nki_library!r}: no test_*.py under {where} (an aws-neuron/nki-library checkout)"
            )
        if args.only and not nkilib.test_files(args.nki_library, tuple(args.only)):
            return f"--only {' '.join(args.only)}: no nki-library test file under {args.nki_library!r} matches"
    if args.only and "nki-library" not in wanted:
        return "--only selects nki-library test files; the nki-library suite is not selected"
    for flag, value in [("-k", args.k), *(("--only", o) for o in args.only or ())]:
        if value is not None and not value.strip():  # '' is in every id: it would select everything
            return f"{flag} {value!r}: an empty SUBSTRING selects nothing; give part of a test id or file name"
    if args.json is not None:  # `--json ''` ran and wrote nothing
        try:
            writable_file(args.json, "--json")
        except UsageError as exc:
            return str(exc)
    opts = Options(
        sdk=sdk,
        nki_library=args.nki_library,
        library_python=args.library_python or sys.executable,
        timeout=args.timeout,
        jobs=args.jobs,
        select=args.k,
        only=tuple(args.only or ()),
    )
    return list(dict.fromkeys(wanted)), opts


def cmd_conformance(args: argparse.Namespace) -> int:
    chosen = _choose(args)
    if isinstance(chosen, str):
        return _fail(chosen)
    names, opts = chosen
    print(f"nki-kernels conformance: {', '.join(names)} through nki_kernels.sim", flush=True)
    t0 = time.perf_counter()
    by_suite = run_suites(names, opts, out=lambda s: print(s, flush=True))
    results = [r for rs in by_suite.values() for r in rs]
    if not results:
        return _fail(f"no tests matched{' -k ' + opts.select if opts.select else ''}")
    if "sdk-tests" in by_suite and by_suite["sdk-tests"]:
        print()
        print(format_file_table(by_suite["sdk-tests"]))
    if "nki-library" in by_suite and opts.nki_library:
        print()
        print(nkilib.format_file_table(opts.nki_library, opts.only, by_suite["nki-library"]))
    print()
    print(format_suite_table(by_suite))
    if args.json:
        rec = {
            "sdk_path": os.path.abspath(opts.sdk) if opts.sdk else None,
            "sdk_commit": git_commit(opts.sdk),
            "nki_library_path": os.path.abspath(opts.nki_library) if opts.nki_library else None,
            "nki_library_commit": git_commit(opts.nki_library),
            "seconds": round(time.perf_counter() - t0, 1),
            "timeout": opts.timeout,
            "suites": {n: summarize(rs) for n, rs in by_suite.items()},
            "files": {f: c for f, c in per_file(by_suite.get("sdk-tests", []))},
            "results": [asdict(r) for r in results],
        }

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(rec, f, indent=1)

        write_atomically(args.json, write)  # whole or not at all (Ctrl-C, a full disk)
        print(f"wrote {args.json}")
    return 1 if any(r.outcome in BAD for r in results) else 0
