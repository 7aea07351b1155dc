"""``nki-kernels`` command line.

verify      run every kernel in the simulator on representative shapes (incl. CS149)
            against its NumPy oracle; print errors, pass/fail, wall time, estimates
run FILE    run a Python file with `neuronxcc.nki` (NKI 0.1) or `nki` (NKI 0.7, picked from the
            file's imports or --api) resolving to the interpreter
            (--strict, --shuffle SEED, --no-poison, --precision; --estimate-benchmark)
conformance PATH   public NKI code through the interpreter: the SDK's 0.1 tests, 0.7 examples and
            docstrings (a local aws-neuron-sdk checkout), nki-library's tests (--nki-library)
sim-bench   the interpreter's own speed (per-instruction overhead, matmul loop)
profile / bench / roofline   cost-model estimates (see docs/cost-model.md)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import runpy
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from math import prod
from typing import Any

import numpy as np

from nki_kernels import lifecycle
from nki_kernels.conformance import add_subcommand as add_conformance
from nki_kernels.kernels import registry
from nki_kernels.perf import ModelOptions, estimate_trace
from nki_kernels.perf.cli import add_subcommands as add_perf_subcommands
from nki_kernels.perf.model import build_options
from nki_kernels.progress import Progress
from nki_kernels.sim import install_neuronxcc_alias, install_nki_alias, set_default_options, trace_kernel
from nki_kernels.sim.nki07 import trace as trace07
from nki_kernels.sim.options import _from_env
from nki_kernels.tolerances import compare
from nki_kernels.usage import (
    OneLineParser,
    UsageError,
    add_max_instructions,
    int_at_least,
    int_in_range,
    plain_text,
)
from nki_kernels.userkernel import apis_of_source

# verify --jobs: at most this many worker processes (each holds a trace of up to ~1 GB, the CS149 224x224 case)
MAX_JOBS = 64


def _verify_groups(quick: bool) -> list[tuple[int, int]]:
    """(spec index, case index) of every case of the registry's verify set (``verify-quick`` with
    --quick).  A group is one case traced in each NKI generation, on the same seeded inputs, and
    compared with one float64 oracle result."""
    set_name = "verify-quick" if quick else "verify"
    return [(i, j) for i, spec in enumerate(registry.SPECS) for j in range(len(spec.cases(set_name)))]


# One verify row: kernel, NKI API, shape, dtype, max abs err, max rel err, result, sim wall s, estimate,
# and the reason of a failure ("" when it passed).
VerifyRow = tuple[str, str, str, str, str, str, str, str, str, str]
# One trace job: (spec index, case index, NKI API, quick, estimate).
VerifyJob = tuple[int, int, str, bool, bool]
# What a trace job gives back: sim wall s, estimate, the output (or the path of its .npy file), and why
# the kernel is missing ("" when it ran).
Traced = tuple[float, str, Any, str]


def _verify_case(spec_i: int, case_i: int, quick: bool) -> tuple[Any, Any]:
    spec = registry.SPECS[spec_i]
    return spec, spec.cases("verify-quick" if quick else "verify")[case_i]


def _verify_oracle(spec_i: int, case_i: int, quick: bool) -> Any:
    """The float64 oracle result of one case, on its seeded inputs."""
    spec, case = _verify_case(spec_i, case_i, quick)
    a, kw = spec.make_inputs(case)
    return spec.load_oracle()(*a, **kw)


def _verify_trace(job: VerifyJob, spill: str | None = None, progress: bool = False) -> Traced:
    """Trace one case in one NKI generation (module level: a worker process runs it).  With ``spill``
    (a directory; in a worker) the output is saved there as float32 -- exact for the registry's fp32,
    fp16 and bf16 outputs -- and its path returned: a pickled 200 MB result took 1.2 s to reach the
    parent, a file in the page cache is one copy."""
    spec_i, case_i, api, quick, estimate = job
    spec, case = _verify_case(spec_i, case_i, quick)
    try:
        fn = spec.load(api)
    except ImportError as e:
        return 0.0, "-", None, str(e)
    tracer = trace_kernel if api == "0.1" else trace07
    a, kw = spec.make_inputs(case)
    t0 = time.perf_counter()
    with Progress(f"verify {spec.title} (NKI {api})") if progress else contextlib.nullcontext():
        out, trace = tracer(fn, *a, **kw)
    wall = time.perf_counter() - t0
    est = _verify_estimate(fn, trace) if estimate else "-"
    if spill is not None:
        path = os.path.join(spill, f"{spec_i}-{case_i}-{api}.npy")
        np.save(path, np.asarray(out).astype(np.float32, copy=False))
        out = path
    return wall, est, out, ""


def _verify_rows(group: tuple[int, int], quick: bool, traced: dict[str, Traced], ref: Any) -> list[VerifyRow]:
    """The rows of one group: each generation's output compared with the oracle's ``ref``."""
    spec, case = _verify_case(*group, quick)
    rows: list[VerifyRow] = []
    for api, (wall, est, out, missing) in traced.items():
        if missing:
            rows.append((spec.title, api, case.describe(), "-", "-", "-", "MISSING", "-", "-", missing))
            continue
        if isinstance(out, str):
            out = np.load(out, mmap_mode="r")
        res = compare(out, ref, case.dtype)  # the project's one tolerance table
        rows.append(
            (
                spec.title,
                api,
                case.describe(),
                case.dtype,
                f"{res['max_abs_err']:.2e}",
                f"{res['max_rel_err']:.2e}",
                "PASS" if res["ok"] else "FAIL",
                f"{wall:.2f}",
                est,
                res["reason"],
            )
        )
    return rows


def _verify_estimate(fn: Any, trace: Any) -> str:
    """The cost-model estimate of one verify row with the band of its op class (never raises: the
    estimate must not hide the correctness result)."""
    try:
        x = estimate_trace(trace, options=ModelOptions(**build_options(fn)))
        return f"{x.latency_us:,.1f} \u00b1{100 * x.typical_error:.0f}%"
    except Exception as exc:
        return f"n/a ({type(exc).__name__})"


def _verify_results(
    groups: list[tuple[int, int]], quick: bool, estimate: bool, workers: int
) -> Iterator[list[VerifyRow]]:
    """Each group's rows, in order.  Every (case, NKI generation) is traced by a job of its own: in this
    process (``workers`` 1), or in a pool of worker processes, the biggest cases first.  Meanwhile this
    process computes the float64 oracles in a thread (BLAS-bound: the GIL is released) and compares.
    (With a group per worker, the CS149 224x224 case -- two ~7 s traces beside a ~7 s oracle -- set the
    wall time alone while the other worker sat idle: 25 s against 21 s, interleaved runs.)

    On the way out with an exception (Ctrl-C, SIGTERM, a closed stdout, an error) the workers are
    stopped at once, not waited for (``lifecycle.stop_workers``), and the oracle thread, a daemon,
    never holds up the exit: within a second, no process left behind."""
    jobs = {(g, api): (*g, api, quick, estimate) for g in groups for api in registry.APIS}
    with contextlib.ExitStack() as stack:
        futures = {}
        if workers > 1:
            spill = stack.enter_context(tempfile.TemporaryDirectory(prefix="nki-kernels-verify-"))
            # concurrent.futures loads its process pool (and multiprocessing) on this first use, not at startup
            pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, initializer=lifecycle.worker_init, initargs=(os.getpid(),)
            )
            stack.push(_pool_closer(pool))
            # the first submit forks the workers: before any thread of ours starts (a fork beside a running
            # thread copies the locks it holds; the workers hung)
            for key in sorted(jobs, key=lambda k: -_verify_weight(k[0][0], k[0][1], quick)):  # stable: 0.1 first
                futures[key] = pool.submit(_verify_trace, jobs[key], spill)
            stack.enter_context(Progress("verify"))
        oracles = _OracleThread(quick)
        stack.callback(oracles.stop)
        refs = {g: oracles.submit(g) for g in groups}
        oracles.start()
        for g in groups:
            traced = {
                api: futures.pop((g, api)).result() if futures else _verify_trace(jobs[g, api], progress=True)
                for api in registry.APIS
            }
            yield _verify_rows(g, quick, traced, refs.pop(g).result())


def _pool_closer(pool: concurrent.futures.ProcessPoolExecutor) -> Any:
    """An ExitStack exit callback: a normal end lets the idle workers exit; any exception stops them now."""

    def close(exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            pool.shutdown(wait=True)
        else:
            lifecycle.stop_workers(pool)
        return False

    return close


class _OracleThread:
    """The float64 oracles of verify, one after the other in a daemon thread (a ThreadPoolExecutor's
    thread is joined at exit: Ctrl-C waited for the ~7 s oracle of the CS149 224x224 case)."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.todo: list[tuple[tuple[int, int], Future]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="nki-verify-oracles", daemon=True)

    def submit(self, group: tuple[int, int]) -> Future:
        fut: Future = Future()
        self.todo.append((group, fut))
        return fut

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        for group, fut in self.todo:
            if self.stopped.is_set():
                fut.cancel()
                continue
            try:
                fut.set_result(_verify_oracle(*group, self.quick))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
                fut.set_exception(exc)


def _verify_weight(spec_i: int, case_i: int, quick: bool) -> int:
    """A size proxy of one case's work: the elements of its arguments and of its output."""
    spec, case = _verify_case(spec_i, case_i, quick)
    args, out, _ = spec.arg_shapes(case)
    return sum(prod(s) for s in args) + prod(out)


def cmd_verify(args: argparse.Namespace) -> int:
    groups = _verify_groups(args.quick)
    workers = min(args.jobs if args.jobs is not None else (os.cpu_count() or 1), len(groups))
    n = 2 * len(groups)
    fewer = f" (--jobs {args.jobs}: one per case at most)" if args.jobs is not None and args.jobs > workers else ""
    print(
        f"nki-kernels verify: {n} cases in the NumPy interpreter (nki_kernels.sim) vs float64 oracles"
        + (f", {workers} worker processes{fewer}" if workers > 1 else ""),
        flush=True,
    )
    rows: list[VerifyRow] = []
    for group in _verify_results(groups, args.quick, not args.no_estimate, workers):
        for r in group:
            rows.append(r)
            head = f"  [{len(rows)}/{n}] {r[0]} (NKI {r[1]}) {r[2]} {r[3]}"
            if r[6] == "MISSING":
                print(f"{head}: not available ({r[9]})", flush=True)
            else:
                print(f"{head} ... {'PASS' if r[6] == 'PASS' else 'FAIL: ' + r[9]} ({r[7]} s)", flush=True)
    failed = sum(r[6] != "PASS" for r in rows)
    hdr = ("kernel", "NKI", "shape", "dtype", "max abs err", "max rel err", "result", "sim wall s", "est. latency us*")
    table = [hdr] + [r[:9] for r in rows]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(hdr))]
    print()
    for line in table:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    print(
        "\nmax rel err = max|out - ref| / max|ref|.  sim wall s = measured wall time of the interpreter on this "
        "machine.\n* est. latency = trn2 estimate from the cost model (nki_kernels.perf), not a hardware "
        "measurement, with the typical error of its op class (leave-one-out on the public trn2 calibration set, "
        "widened outside the validated domain); see docs/cost-model.md."
    )
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _run_aliases(path, api):
    """NKI API aliases for `run`: --api, else from the file's imports (`import nki` -> 0.7,
    `neuronxcc` -> 0.1, default 0.1)."""
    if api:
        return (api,)
    with open(path, encoding="utf-8") as f:
        src = f.read()
    try:
        return apis_of_source(src) or ("0.1",)
    except SyntaxError:
        return ("0.1",)  # let runpy report the syntax error with its location


def _run_options(args):
    """SimOptions for `run`: NKI_SIM_OPTIONS, then the command-line flags on top."""
    opts = _from_env()
    changes = {}
    if args.strict:
        changes["strict"] = True
    if args.shuffle is not None:
        changes["shuffle_affine_seed"] = args.shuffle
    if args.no_poison:
        changes["poison"] = False
    if args.precision is not None:
        changes["precision"] = args.precision
    if args.max_instructions is not None:
        changes["max_instructions"] = args.max_instructions
    if args.verbose:
        changes["explain_loops"] = True
    if args.per_iteration:
        changes["loop_programs"] = False
    return opts.replace(**changes) if changes else opts


# glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _reuse_large_buffers() -> bool:
    """Let glibc's malloc reuse freed blocks up to 256 MiB instead of mapping each large NumPy array anew and
    faulting its pages in (its default threshold adapts only up to 32 MiB): the official CS149 part 2 harness
    spent 7.3-8.0 s of system time on page faults (734-740k of them; 3.2-4.5 s and 340-495k with this).  For
    `run` only, where the user's script is the whole process; not on other C libraries, nor when
    MALLOC_MMAP_THRESHOLD_ is set (the user's choice).  True when applied."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes  # here: only `run` tunes the allocator

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # (musl has no mallopt)
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, 256 << 20) == 1
    if ok and "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        mallopt(_M_TRIM_THRESHOLD, 512 << 20)  # (keep up to 512 MiB of freed heap for the next arrays)
    return bool(ok)


def cmd_run(args: argparse.Namespace) -> int:
    path = args.file
    if os.path.isdir(path):
        raise UsageError(f"{path!r} is a directory; give the Python file to run (e.g. {path}/test_harness.py)")
    if not os.path.exists(path):
        raise UsageError(f"no such file: {path} (relative to {os.getcwd()})")
    if not os.path.isfile(path):  # /dev/null, a FIFO: the file is read twice (its imports, then run)
        raise UsageError(f"{path!r} is not a regular file; give the Python file to run")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path!r} is not readable (permissions)")
    opts = _run_options(args)
    _reuse_large_buffers()
    previous = set_default_options(opts)
    if args.estimate_benchmark:
        from nki_kernels import estimate_benchmark  # here: loaded for run --estimate-benchmark only (CLI startup)

        estimate_benchmark.install()
    sys.argv = [path] + args.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        # The 0.1 alias defaults third-party code to precision="compat"; an explicit --precision wins.
        with contextlib.ExitStack() as stack:
            for api in _run_aliases(path, getattr(args, "api", None)):
                stack.enter_context(
                    install_nki_alias()
                    if api == "0.7"
                    else install_neuronxcc_alias(precision=None if args.precision else "compat")
                )
            with Progress(f"run {path}"):
                runpy.run_path(path, run_name="__main__")
    except (KeyboardInterrupt, lifecycle.Interrupted, SystemExit, BrokenPipeError):
        raise  # the command's own ways to stop (the file's sys.exit keeps its status)
    except Exception as exc:  # the file's own exception (a SyntaxError too): shown with its frames only
        raise lifecycle.UserCodeError(exc) from None  # (E099 names --estimate-benchmark itself)
    finally:
        if args.estimate_benchmark:
            estimate_benchmark.uninstall()
        set_default_options(previous)
    return 0


def _add_run_flags(r) -> None:
    g = r.add_argument_group("interpreter checks (override NKI_SIM_OPTIONS; give them before FILE)")
    g.add_argument(
        "--strict", action="store_true", help="turn every SimWarning about a hardware-unproven construct into an error"
    )
    g.add_argument(
        "--shuffle",
        metavar="SEED",
        type=int_at_least(0),
        default=None,
        help="run every nl.affine_range in a seeded shuffled order (exposes loop-carried dependencies)",
    )
    g.add_argument(
        "--no-poison", action="store_true", help="do not fill uninitialised memory with NaN (default: poison it)"
    )
    g.add_argument(
        "--precision",
        choices=("hw", "compat"),
        default=None,
        help="hw: round every write to its dtype like hardware; compat (the default "
        "for run): hold bf16/fp8 at fp32 like neuronxcc's simulator",
    )
    add_max_instructions(g)
    g.add_argument(
        "--verbose",
        action="store_true",
        help="say how each nl.affine_range loop ran: as a loop program (two iterations traced, the rest run at "
        "once) or per iteration, and why",
    )
    g.add_argument(
        "--per-iteration",
        action="store_true",
        help="run every iteration of every loop through the interpreter (no loop programs; same results, slower)",
    )
    r.add_argument(
        "--estimate-benchmark",
        action="store_true",
        help="nki.benchmark returns the cost model's ESTIMATE (not a measurement) as its "
        "latency, with a banner before every use; nki.baremetal runs on the "
        "interpreter. Off by default (those APIs need a device)",
    )


def cmd_sim_bench(args: argparse.Namespace) -> int:
    from nki_kernels.sim import speed  # here: loaded for sim-bench only, not at every command's start

    return speed.main(args.iters)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="nki-kernels", description=plain_text(__doc__ or ""), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="all kernels in the simulator vs the oracles (the main job)")
    v.add_argument("--quick", action="store_true", help="skip the large shapes (CS149 224x224, 2048^3, S=4096)")
    v.add_argument("--no-estimate", action="store_true", help="do not run the cost model")
    v.add_argument(
        "--jobs",
        type=int_in_range(1, MAX_JOBS),
        default=None,
        help="worker processes, one trace (a case in one NKI generation) per worker at a time; "
        f"default: the number of CPUs; 1 runs everything in this process; at most {MAX_JOBS}, and never "
        "more than the cases",
    )
    v.set_defaults(func=cmd_verify)
    r = sub.add_parser("run", help="run a Python file with neuronxcc.nki / nki aliased to the interpreter")
    _add_run_flags(r)
    r.add_argument(
        "--api",
        choices=("0.1", "0.7"),
        default=None,
        help="NKI API to alias: 0.1 (neuronxcc.nki) or 0.7 (import nki); default: from the file's imports",
    )
    r.add_argument("file", help="the Python file (relative to the current directory)")
    rest = r.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the file")
    rest.required = False  # argparse lists a REMAINDER positional as required: "required: file, args"
    r.set_defaults(func=cmd_run)
    b = sub.add_parser("sim-bench", help="measure the interpreter's per-instruction overhead and matmul loop")
    b.add_argument(
        "--iters", type=int_in_range(1, 100_000), default=1000, help="matmuls in the loop, 1..100,000 (default 1000)"
    )
    b.set_defaults(func=cmd_sim_bench)
    add_conformance(sub)
    add_perf_subcommands(sub)
    return p
