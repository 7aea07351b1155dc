"""The hardware job (``scripts/run_hw.sh`` is its launcher): ``python -m nki_kernels.hw.run --help``.

Preflight (read-only probes: instance, ``neuron-ls``, venv, SDK path, profiler, free NeuronCores,
results folder), the plan (one correctness job per kernel, one job per benchmark case, from the
kernel registry), install, the construct smoke test, then the jobs on one worker thread per
NeuronCore, each running its jobs' steps one after another as subprocesses in process groups of
their own (``NEURON_RT_VISIBLE_CORES``: a process holds its cores until it exits).  The manifest is
kept in this process (``nki_kernels.hw.manifest``).  Ctrl-C, SIGTERM and SIGHUP stop every running
step (its whole process group: SIGTERM, SIGKILL after ``NKI_HW_STOP_GRACE`` seconds) and wait for
all of them before the folder is marked interrupted; a results folder that cannot be written stops
the run the same way (exit 17).  The SDK picks the path (``sdk.py``): the NKI 0.1 or the NKI 0.7
implementation of ``nki_kernels.hw.protocol``.

Needs only the standard library (any Python >= 3.10 runs it); the steps run in the Neuron venv.
"""

from __future__ import annotations

import concurrent.futures
import enum
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from nki_kernels import environment, lifecycle
from nki_kernels.kernels import registry
from nki_kernels.kernels.registry import Case

from . import env as hw_env
from .job import NKI01
from .manifest import Manifest, ResultsWriteError, junit_failures
from .nki07_path import NKI07
from .protocol import ROOT, HwPath, Step, StepContext, env_argv, stem

PROG = "run_hw.sh"
NEURON_BIN = "/opt/aws/neuron/bin"
DEFAULT_VENVS = ("/opt/aws_neuronx_venv_pytorch_2_8", "/opt/aws_neuronx_venv_pytorch_2_9")
POLL_S = 0.2  # how often a waiting step looks at the stop request
TIMEOUT_KILL_AFTER_S = 30  # a step over its --timeout: SIGTERM, then SIGKILL this much later

# The SDK paths by name (sdk.py's decision), each implementing the step protocol (protocol.py).
PATHS: dict[str, HwPath] = {"nki01": NKI01, "nki07": NKI07}


def for_name(name: str) -> HwPath:
    """The implementation of an SDK path: ``nki01`` or ``nki07``."""
    if name not in PATHS:
        raise ValueError(f"unknown hardware path {name!r}; allowed: {', '.join(PATHS)}")
    return PATHS[name]


class Exit(enum.IntEnum):
    """The job's exit codes (--help and docs/hardware.md)."""

    OK = 0
    USAGE = 2
    INSTANCE = 10
    DEVICE = 11
    SDK = 12
    VENV = 13
    CORES = 14
    PROFILER = 15
    INSTALL = 16
    RESULTS = 17
    SDK_REFUSED = 18
    CONSTRUCTS = 19
    STEPS = 20
    SIGHUP = 129
    SIGINT = 130
    SIGPIPE = 141
    SIGTERM = 143


# When several preflight checks fail, the exit code is that of the first failure in this order.
PREFLIGHT_ORDER = (
    Exit.INSTANCE,
    Exit.DEVICE,
    Exit.PROFILER,
    Exit.VENV,
    Exit.SDK,
    Exit.SDK_REFUSED,
    Exit.CORES,
    Exit.RESULTS,
)
SIGNALS = {
    signal.SIGINT: (Exit.SIGINT, "SIGINT (Ctrl-C)"),
    signal.SIGTERM: (Exit.SIGTERM, "SIGTERM"),
    signal.SIGHUP: (Exit.SIGHUP, "SIGHUP (the terminal closed)"),
}
# Why a run stopped early: a signal above, or its standard output closed (`run_hw.sh | head`), which
# stops it as SIGPIPE stops a C program (Python ignores SIGPIPE: a write raises BrokenPipeError).
STOPS = {**SIGNALS, signal.SIGPIPE: (Exit.SIGPIPE, "SIGPIPE (its standard output was closed)")}
# The most NeuronCores an instance has: a trn2.48xlarge, 16 devices x 8 physical cores (LNC=1).
MAX_CORES = 128
# Upper bounds of the numeric options: beyond them a typo, never a plan (a week per step; a
# benchmark of a million executions already takes minutes per case on the device).
MAX_TIMEOUT_S = 7 * 24 * 3600
MAX_EXECUTIONS = 1_000_000

HELP = f"""\
Usage: scripts/run_hw.sh [options]

Run the nki-kernels hardware job on a trn2 instance: preflight, install the project into
the Neuron venv, run the construct smoke test (the run stops if a construct fails), run the
correctness tests, benchmark every selected case, capture a profile per case (NEFF + NTFF,
summary-json/-text, Perfetto trace), compare with the cost-model estimate, and write
everything to a new results/<UTC timestamp>-<git sha>/ folder with manifest.json and
SUMMARY.md.  The installed SDK picks the path:
  SDK 2.26/2.27 (2.28/2.29 warn): the NKI 0.1 kernels (neuronxcc.nki): smoke test
      hw_tests/test_constructs.py, hw_tests with nki.baremetal and torch-neuronx, latency
      from nki.benchmark, neuron-profile captures;
  SDK >= 2.33: the NKI 0.7 kernels (import nki): smoke test of the NKI 0.7 constructs,
      @nki.jit on NumPy and torch-neuronx vs the oracles (nki.simulate cross-check where it
      exists), latency from profiled executions and captures with neuron-explorer;
  SDK 2.30-2.32: refused (exit 18): neuronxcc.nki kernels no longer compile there.

Options:
  --kernels LIST     comma-separated: conv2d,matmul,attention or 'all' (default: all)
  --shapes SET       quick | cs149 | full (default: quick)
  --cores N|LIST     N = use N free NeuronCores (1..{MAX_CORES}); LIST = core ids 0..{MAX_CORES - 1}
                     such as 0-3 or 0,8, each once. Independent jobs are dealt round-robin
                     to them, one job per core at a time, each step with
                     NEURON_RT_VISIBLE_CORES=<its core> (default: 1)
  --timeout SECONDS  limit for every single step, 1..{MAX_TIMEOUT_S} (default: 1800)
  --warmup N         warm-up executions per benchmark, 0..{MAX_EXECUTIONS:,} (default: 10)
  --iters N          measured executions per benchmark, 1..{MAX_EXECUTIONS:,} (default: 100)
  --venv PATH        Neuron Python venv (default: $VIRTUAL_ENV if it has neuronx-cc or nki,
                     else the first of /opt/aws_neuronx_venv_pytorch_2_8, _2_9, _*)
  --results-dir DIR  parent of the run folder (default: <repo>/results)
  --skip-install     do not pip-install the project (it is still found via PYTHONPATH)
  --skip-tests       do not run hw_tests, nor the construct smoke test (benchmarks and profiles only)
  --no-estimate      skip the cost-model estimate and the profile-vs-estimate comparison
  --dry-run          run the read-only preflight probes, list their failures, print every
                     command the job would run, run nothing, exit 0 (its one write: an empty
                     probe folder created and removed where the results folder would go)
  -h, --help         show this help and exit 0

Every bad argument is one line on stderr and exit code 2, before anything runs.

Exit codes:
  0   every step passed
  2   bad command-line usage
  10  not a trn2 instance (DMI product name)
  11  no Neuron device: neuron-ls missing, failing, or listing no device
  12  no usable Neuron SDK in the venv (no neuronx-cc, or no neuronxcc.nki on 2.26-2.29)
  13  no Neuron venv found (or --venv has no bin/python)
  14  not enough free NeuronCores for --cores
  15  the profiler is missing: neuron-profile (NKI 0.1 path) or neuron-explorer (NKI 0.7
      path), both from aws-neuronx-tools
  16  installing the project failed
  17  the results folder cannot be created or written (read-only, disk full): found at
      preflight, or during the run, which then stops; the manifest is marked "failed" with
      the reason when it can still be written
  18  the SDK is refused: 2.30-2.32, where neuronxcc.nki kernels no longer compile or
      silently misbehave and NKI is older than 0.7 (fix: a 2.26/2.27 or >= 2.33 DLAMI)
  19  the construct smoke test failed (hw_tests/test_constructs.py on the NKI 0.1 path,
      nki_kernels/kernels/smoke_nki07.py on the NKI 0.7 path); nothing was benchmarked
  20  the run finished but some step failed (see SUMMARY.md and logs/)
  129 interrupted by SIGHUP (the terminal closed; run under nohup to keep going)
  130 interrupted by SIGINT (Ctrl-C)
  141 its standard output was closed (e.g. piped into head): stopped as by SIGPIPE
  143 interrupted by SIGTERM
      (on 129/130/141/143 every running step -- its whole process group -- is stopped and
      waited for, finished results are kept, the manifest says "interrupted", lists the jobs
      that never started, and an INTERRUPTED file marks the folder)

Progress: one line per job as it ends, e.g. "[3/18] conv2d b1_ci256_co256_... ok 0:41".
When several preflight checks fail, the code is that of the first in the order
{", ".join(str(int(c)) for c in PREFLIGHT_ORDER)}; all failures are printed.

Environment: NKI_HW_PRODUCT_NAME_FILE (default /sys/devices/virtual/dmi/id/product_name),
NKI_HW_VENV_CANDIDATES (space-separated venv paths to try), NKI_HW_KERNEL_<NAME>
(module:function of an alternative kernel, e.g. a CS149 solution), NKI_HW_CONSTRUCTS_TEST
(the construct smoke test file, default hw_tests/test_constructs.py), NKI_HW_STOP_GRACE
(seconds a stopped step gets between SIGTERM and SIGKILL, default 10).
"""


# ------------------------------------------------------------------------------- options
class UsageError(Exception):
    """A bad argument: one line, exit code 2."""


@dataclass
class Options:
    """The command line, validated."""

    kernels: str = "all"
    kernel_list: tuple[str, ...] = registry.KERNELS
    shapes: str = "quick"
    cores: str = "1"
    timeout: int = 1800
    warmup: int = 10
    iters: int = 100
    venv: str = ""
    results_dir: str = os.path.join(ROOT, "results")
    skip_install: bool = False
    skip_tests: bool = False
    no_estimate: bool = False
    dry_run: bool = False
    stop_grace: int = 10
    constructs_test: str = os.path.join(ROOT, "hw_tests", "test_constructs.py")
    argv: list[str] = field(default_factory=list)


FLAGS = ("--dry-run", "--skip-install", "--skip-tests", "--no-estimate")
VALUED = ("--kernels", "--shapes", "--cores", "--timeout", "--warmup", "--iters", "--venv", "--results-dir")
OPTIONS = ("--help", *FLAGS, *VALUED)
_CORES_RE = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")


def _check_cores(spec: str) -> str:
    if not _CORES_RE.match(spec):
        raise UsageError(f"--cores must be a count (4) or core ids (0-3, 0,8), got '{spec}'")
    if spec.isdigit():
        if int(spec) < 1:
            raise UsageError(f"--cores must be a count >= 1 or core ids (0-3, 0,8), got '{spec}'")
        if int(spec) > MAX_CORES:
            raise UsageError(f"--cores {spec}: at most {MAX_CORES} (a trn2.48xlarge has 16 devices x 8 NeuronCores)")
        return spec
    seen: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if hi and int(lo) > int(hi):
            raise UsageError(f"--cores range '{part}' runs backwards; write it low-high (e.g. 0-3)")
        top = int(hi or lo)
        if top >= MAX_CORES:
            raise UsageError(f"--cores '{spec}': core id {top} does not exist; ids are 0..{MAX_CORES - 1}")
        ids = set(range(int(lo), top + 1))
        if ids & seen:
            raise UsageError(f"--cores '{spec}': core {min(ids & seen)} is listed twice; name each core once")
        seen |= ids
    return spec


def core_ids(spec: str) -> list[str]:
    """The cores a valid --cores names without asking the device: ``"0-2,8"`` -> 0 1 2 8, ``"3"`` ->
    0 1 2 (a count: the lowest ids, what a machine with every core free gives)."""
    if spec.isdigit():
        return [str(c) for c in range(int(spec))]
    return [str(c) for c in hw_env.parse_core_spec(spec)]


def _int(opt: str, value: str, minimum: int, what: str, maximum: int) -> int:
    if not value.isdigit() or int(value) < minimum:  # isdigit: no sign, no spaces, no "1e3"
        raise UsageError(f"{opt} must be {what}, got '{value}'")
    if int(value) > maximum:
        raise UsageError(f"{opt} {value}: at most {maximum:,}")
    return int(value)


def parse_args(argv: list[str], environ: dict[str, str]) -> Options | None:
    """The validated options, or None for --help.  Raises UsageError (one line) on any bad argument
    or bad NKI_HW_* variable."""
    o = Options(argv=list(argv))
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        opt, eq, val = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        i += 1
        if opt in ("-h", "--help"):
            return None
        if opt in FLAGS:
            if eq:
                raise UsageError(f"{opt} takes no value, got '{arg}'")
            setattr(o, opt[2:].replace("-", "_"), True)
        elif opt in VALUED:
            if not eq:
                if i >= len(argv):
                    raise UsageError(f"{opt} needs a value")
                val = argv[i]
                i += 1
            values[opt] = val
        else:
            raise UsageError(f"unknown option '{opt}'")
    for opt, val in values.items():
        if opt != "--kernels" and not val.strip():
            raise UsageError(f"{opt} needs a value, got an empty one")
    if "--kernels" in values:
        o.kernels = values["--kernels"].replace(" ", "")
        try:
            o.kernel_list = registry.parse_kernels(o.kernels)
        except ValueError as e:
            raise UsageError(f"--kernels: {e}") from None
    o.shapes = values.get("--shapes", o.shapes)
    if o.shapes not in registry.HW_SETS:
        raise UsageError(f"--shapes must be quick, cs149 or full, got '{o.shapes}'")
    o.cores = _check_cores(values.get("--cores", o.cores))
    o.timeout = _int(
        "--timeout", values.get("--timeout", str(o.timeout)), 1, "a positive number of seconds", MAX_TIMEOUT_S
    )
    o.warmup = _int("--warmup", values.get("--warmup", str(o.warmup)), 0, "a non-negative integer", MAX_EXECUTIONS)
    o.iters = _int("--iters", values.get("--iters", str(o.iters)), 1, "a positive integer", MAX_EXECUTIONS)
    o.venv = os.path.abspath(values["--venv"]) if "--venv" in values else ""  # steps run in other folders
    o.results_dir = os.path.abspath(values.get("--results-dir", o.results_dir))
    grace = environ.get("NKI_HW_STOP_GRACE", "10")
    if not grace.isdigit():
        raise UsageError(f"NKI_HW_STOP_GRACE must be a whole number of seconds, got '{grace}'")
    if int(grace) > 3600:
        raise UsageError(f"NKI_HW_STOP_GRACE={grace}: at most 3600 seconds")
    o.stop_grace = int(grace)
    o.constructs_test = os.path.abspath(environ.get("NKI_HW_CONSTRUCTS_TEST") or o.constructs_test)
    return o


# ------------------------------------------------------------------------------- preflight
@dataclass
class Preflight:
    """What the read-only probes found: successes, failures (exit code, message) and the facts."""

    oks: list[str] = field(default_factory=list)
    fails: list[tuple[Exit, str]] = field(default_factory=list)
    instance_type: str = "unknown"
    venv: str = ""
    python: str = ""
    api: str = ""  # nki01 | nki07 | "" (no usable SDK)
    profiler: str = "neuron-profile"
    cores: list[str] = field(default_factory=list)
    neuron_ls_json: str = ""

    def fail(self, code: Exit, message: str) -> None:
        self.fails.append((code, message))

    def exit_code(self) -> Exit:
        codes = {c for c, _ in self.fails}
        return next((c for c in PREFLIGHT_ORDER if c in codes), Exit.SDK)

    def report(self) -> str:
        lines = ["preflight:", *(f"  ok      {m}" for m in self.oks), *(f"  FAIL[{int(c)}] {m}" for c, m in self.fails)]
        return "\n".join(lines)


def _head(text: str, n: int = 300) -> str:
    return " ".join(text.split())[:n]


def _has_neuron_packages(python: str) -> bool:
    code = "import importlib.util as u, sys; sys.exit(not (u.find_spec('neuronxcc') or u.find_spec('nki')))"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_venv(opts: Options, environ: dict[str, str], pf: Preflight) -> None:
    """--venv, else an activated venv with neuronx-cc or nki, else the first DLAMI venv found."""
    if opts.venv:
        if os.access(os.path.join(opts.venv, "bin", "python"), os.X_OK):
            pf.venv = opts.venv
        else:
            pf.fail(Exit.VENV, f"--venv {opts.venv} has no bin/python")
        return
    active = environ.get("VIRTUAL_ENV", "")
    if (
        active
        and os.access(os.path.join(active, "bin", "python"), os.X_OK)
        and _has_neuron_packages(os.path.join(active, "bin", "python"))
    ):
        pf.venv = os.path.abspath(active)
        return
    # SDK 2.26/2.27 DLAMIs ship _2_8/_2_9; later ones other pytorch venvs (e.g. the vLLM one).
    listed = environ.get("NKI_HW_VENV_CANDIDATES")
    candidates = (
        listed.split()
        if listed is not None
        else [*DEFAULT_VENVS, *sorted(glob.glob("/opt/aws_neuronx_venv_pytorch_*"))]
    )
    for c in candidates:
        if os.access(os.path.join(c, "bin", "python"), os.X_OK):
            pf.venv = os.path.abspath(c)
            return
    pf.fail(Exit.VENV, f"no Neuron venv: tried {' '.join(candidates)} (use --venv PATH or activate one)")


def results_problem(path: str) -> str | None:
    """Why no run folder can be made under ``path`` (None when one can): a probe folder is created and
    removed in ``path`` or, when it does not exist yet, in its nearest existing ancestor."""
    probe_dir = path
    while not os.path.exists(probe_dir):
        parent = os.path.dirname(probe_dir)
        if parent == probe_dir:
            break
        probe_dir = parent
    if not os.path.isdir(probe_dir):
        return f"{probe_dir} is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".run_hw-probe-", dir=probe_dir))
    except OSError as e:
        return f"cannot create folders in {probe_dir}: {e.strerror or e}"
    return None


def preflight(opts: Options, environ: dict[str, str]) -> Preflight:
    pf = Preflight()
    product = environ.get("NKI_HW_PRODUCT_NAME_FILE", hw_env.PRODUCT_NAME_FILE)
    itype = "".join((hw_env.instance_type(product) or "").split())
    pf.instance_type = itype or "unknown"
    if itype.startswith("trn2"):
        pf.oks.append(f"instance type {itype}")
    else:
        pf.fail(
            Exit.INSTANCE,
            f"instance type is '{itype or 'unreadable'}' (from {product}); needs trn2.3xlarge or trn2.48xlarge",
        )

    find_venv(opts, environ, pf)
    if pf.venv:
        pf.python = os.path.join(pf.venv, "bin", "python")
        pf.oks.append(f"venv {pf.venv}")

    ndev, devices = 0, []
    neuron_ls = shutil.which("neuron-ls", path=environ.get("PATH"))
    if neuron_ls is None:
        pf.fail(Exit.DEVICE, f"neuron-ls not found on PATH or in {NEURON_BIN} (install aws-neuronx-tools)")
    else:
        try:
            proc = subprocess.run([neuron_ls, "--json-output"], capture_output=True, text=True, timeout=120)
            err = "" if proc.returncode == 0 else _head(proc.stderr or proc.stdout)
        except (OSError, subprocess.TimeoutExpired) as e:
            proc, err = None, str(e)
        if proc is None or proc.returncode != 0:
            pf.fail(Exit.DEVICE, f"neuron-ls --json-output failed: {err}")
        else:
            try:
                devices = hw_env.parse_neuron_ls(proc.stdout)
                pf.neuron_ls_json, ndev = proc.stdout, len(devices)
            except ValueError as e:
                pf.fail(Exit.DEVICE, f"cannot parse neuron-ls output: {_head(str(e))}")
            if devices:
                pf.oks.append(f"{ndev} Neuron device(s)")
            elif pf.neuron_ls_json:
                pf.fail(Exit.DEVICE, "neuron-ls lists no Neuron device (is the aws-neuronx-dkms driver loaded?)")

    # The SDK picks the path (nki01: NKI 0.1 kernels, neuron-profile; nki07: NKI 0.7 kernels,
    # neuron-explorer) or is refused; sdk.py path prints "<path> <message>" (exit 0/1/3).
    if pf.python:
        try:
            proc = subprocess.run(
                [pf.python, "-m", "nki_kernels.hw.sdk", "path"], capture_output=True, text=True, timeout=300
            )
            rc, msg = proc.returncode, (proc.stdout + proc.stderr).strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            rc, msg = -1, f"- {e}"
        path, _, text = msg.partition(" ")
        if rc == 0 and path in ("nki01", "nki07"):
            pf.api = path
            pf.oks.append(text)
        elif rc == 1:
            pf.fail(Exit.SDK, text)
        elif rc == 3:
            pf.fail(Exit.SDK_REFUSED, text)
        else:
            pf.fail(Exit.SDK, f"SDK check failed (exit {rc}): {_head(msg)}")
    else:
        pf.fail(Exit.SDK, "SDK not checked: no venv")
    pf.profiler = for_name(pf.api or "nki01").profiler

    tool = shutil.which(pf.profiler, path=environ.get("PATH"))
    if tool:
        pf.oks.append(f"{pf.profiler} {tool}")
    else:
        pf.fail(Exit.PROFILER, f"{pf.profiler} not found on PATH or in {NEURON_BIN} (install aws-neuronx-tools)")

    if ndev:
        try:
            pf.cores = [str(c) for c in hw_env.choose_cores(opts.cores, hw_env.free_cores(devices))]
            pf.oks.append(f"NeuronCores {' '.join(pf.cores)}")
        except ValueError as e:
            pf.fail(Exit.CORES, f"--cores {opts.cores}: {e}")
    else:
        pf.fail(Exit.CORES, "free NeuronCores not checked: no device")

    problem = results_problem(opts.results_dir)
    if problem:
        pf.fail(Exit.RESULTS, f"results folder {opts.results_dir} cannot be created: {problem}")
    else:
        pf.oks.append(f"results folder {opts.results_dir} writable")
    return pf


# ------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Job:
    """One unit of the plan: a kernel's correctness tests or one benchmark case, on one core."""

    index: int
    kind: str  # "hw_tests" | "case"
    kernel: str
    case: Case | None
    core: str

    @property
    def what(self) -> str:
        return f"hw_tests {self.kernel}" if self.case is None else f"{self.kernel} {self.case.name}"

    def record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "kernel": self.kernel,
            "case": self.case.name if self.case else "",
            "core": self.core,
            "what": self.what,
        }


def plan(opts: Options, cores: list[str]) -> list[Job]:
    """Correctness jobs (one per kernel, unless --skip-tests), then one job per benchmark case of
    the registry's hardware set, dealt round-robin to the cores."""
    units: list[tuple[str, str, Case | None]] = []
    if not opts.skip_tests:
        units += [("hw_tests", k, None) for k in opts.kernel_list]
    units += [("case", c.kernel, c) for c in registry.select(opts.kernel_list, opts.shapes, bench=True)]
    return [Job(i + 1, kind, kernel, case, cores[i % len(cores)]) for i, (kind, kernel, case) in enumerate(units)]


# ------------------------------------------------------------------------------- running steps
_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
)  # 3.10: setpgid in the child before exec


class _Ids:
    """Step ids: ``m-NNN`` in the main thread, ``wK-NNN`` in worker K."""

    def __init__(self, prefix: str) -> None:
        self.prefix, self.n = prefix, 0

    def next(self) -> str:
        self.n += 1
        return f"{self.prefix}-{self.n:03d}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(proc: subprocess.Popen, grace: float) -> int:
    """SIGTERM a step's whole process group, SIGKILL what is left after ``grace`` seconds, reap it;
    returns its exit code in the shell's convention (128 + signal)."""
    _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        proc.poll()
        if not _group_alive(proc.pid):
            break
        time.sleep(0.05)
    _signal_group(proc.pid, signal.SIGKILL)
    rc = proc.wait()
    return 128 - rc if rc < 0 else rc


def _took(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


class HardwareJob:
    """One run of the job (see the module docstring)."""

    def __init__(self, opts: Options, environ: dict[str, str]) -> None:
        self.opts, self.environ = opts, environ
        self.stop = threading.Event()
        self.signal: signal.Signals | None = None
        self.fault_reason = ""  # the results folder cannot be written (exit 17)
        self.crashed = ""  # a bug in this job (exit 1)
        self.n_jobs = 0
        self.lock = threading.Lock()
        self.run_dir = ""
        self.manifest: Manifest | None = None
        self.path: HwPath = for_name("nki01")
        self.ctx: StepContext | None = None
        user_path = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]
        self.pythonpath = os.pathsep.join([ROOT, *user_path])  # this checkout first, whatever is installed

    # -- events
    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.signal is None and not self.stop.is_set():
            self.signal = signal.Signals(signum)
        self.stop.set()

    def on_stdout_closed(self) -> None:
        """Standard output closed (``run_hw.sh | head``): stop the run as SIGPIPE would, cleanly."""
        self.on_signal(signal.SIGPIPE, None)

    def fault(self, reason: str) -> None:
        with self.lock:
            if not self.fault_reason:
                self.fault_reason = reason
        self.stop.set()

    def crash(self, e: BaseException) -> None:
        """A bug: say so with its traceback, stop everything, keep the folder consistent."""
        self.say(traceback.format_exc().rstrip(), err=True)
        with self.lock:
            if not self.crashed:
                self.crashed = f"{PROG} stopped unexpectedly: {type(e).__name__}: {e}"
        self.stop.set()

    def say(self, text: str, err: bool = False) -> None:
        with self.lock:
            print(text, file=sys.stderr if err else sys.stdout, flush=True)

    # -- one step
    def run_step(self, step: Step, ids: _Ids, job: int | None = None) -> int | None:
        """Run one step (or print it with --dry-run); its exit code, or None when the run is stopping.
        Raises ResultsWriteError when its log or manifest entry cannot be written."""
        if self.opts.dry_run:
            line = f"+ cd {shlex.quote(step.cwd)} && {shlex.join(step.argv)}"
            print(line + (f" > {shlex.quote(step.stdout)}" if step.stdout else ""))
            return 0
        if self.stop.is_set():
            return None
        assert self.manifest is not None
        sid = ids.next()
        log = os.path.join(self.run_dir, "logs", f"{sid}-{step.name}.log")
        self.manifest.step_start(
            step_id=sid,
            name=step.name,
            phase=step.phase,
            log=os.path.relpath(log, self.run_dir),
            kernel=step.kernel,
            case=step.case,
            core=step.core,
            command=list(step.argv),
            job=job,
        )
        files = []
        try:
            try:
                files.append(open(log, "wb"))
            except OSError as e:
                raise ResultsWriteError(f"cannot create the step log {log}: {e.strerror or e}") from None
            if step.stdout:
                try:
                    files.append(open(step.stdout, "wb"))
                except OSError as e:
                    raise ResultsWriteError(f"cannot create {step.stdout}: {e.strerror or e}") from None
            out = files[-1]
            stopped = False
            try:
                proc = subprocess.Popen(
                    step.argv,
                    cwd=step.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=files[0] if step.stdout else subprocess.STDOUT,
                    **_GROUP,
                )
            except OSError as e:
                files[0].write(f"{PROG}: cannot start {step.argv[0]}: {e}\n".encode())
                rc = 127
            else:
                rc, stopped = self._wait(proc)
                if not stopped and _group_alive(proc.pid):
                    # a step owns its process group: what it left running (a runtime helper, a
                    # `sleep`) would outlive the job, holding its NeuronCore
                    stop_group(proc, self.opts.stop_grace)
                    files[0].write(f"{PROG}: stopped the processes this step left running\n".encode())
        finally:
            for f in files:
                f.close()
        self.manifest.step_end(
            sid, rc, status="interrupted" if stopped else None, note="stopped by the run" if stopped else ""
        )
        if rc != 0 and not stopped:
            self.say(f"[{PROG}] step {step.name} failed (exit {rc}), log: {log}", err=True)
        return None if stopped else rc

    def _wait(self, proc: subprocess.Popen) -> tuple[int, bool]:
        deadline = time.monotonic() + self.opts.timeout
        while True:
            try:
                return proc.wait(timeout=POLL_S), False
            except subprocess.TimeoutExpired:
                pass
            if self.stop.is_set():
                return stop_group(proc, self.opts.stop_grace), True
            if time.monotonic() >= deadline:  # GNU timeout's convention: exit code 124
                stop_group(proc, TIMEOUT_KILL_AFTER_S)
                return 124, False

    # -- jobs
    def case_job(self, case: Case, core: str, ids: _Ids, job: int | None) -> int:
        """Estimate, bench, capture, summaries, Perfetto, comparison of one case; failed steps."""
        assert self.ctx is not None
        d = os.path.join(self.ctx.run, case.kernel, case.name)
        st, dry, tool = stem(case), self.opts.dry_run, self.path.profiler
        failed = 0

        def step(s: Step) -> int | None:
            nonlocal failed
            rc = self.run_step(s, ids, job)
            failed += rc not in (0, None)
            return rc

        def profiler(name: str, *args: str, core: str = "", stdout: str = "") -> Step:
            argv = (tool, *args) if not core else env_argv({"NEURON_RT_VISIBLE_CORES": core}, tool, *args)
            return Step(f"{name}-{st}", "profile", argv, d, case.kernel, case.name, core, stdout)

        if not dry:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise ResultsWriteError(f"cannot create {d}: {e.strerror or e}") from None
        if not self.opts.no_estimate:
            step(self.path.estimate_step(self.ctx, case, d))
        if step(self.path.bench_step(self.ctx, case, d, core)) != 0:
            return failed
        if not dry and not os.path.exists(os.path.join(d, f"{st}.neff")):
            self.say(f"[{PROG}] no NEFF for {st}; profile skipped", err=True)
            return failed
        view = ("view", "-n", f"{st}.neff", "-s", f"{st}.ntff", "--output-format")
        if (
            step(
                profiler(
                    "capture", "capture", "-n", f"{st}.neff", "-s", f"{st}.ntff", *self.path.capture_args, core=core
                )
            )
            != 0
        ):
            return failed
        if not dry:
            try:
                self.path.after_capture(d, st)
            except OSError as e:
                raise ResultsWriteError(f"cannot rename the capture of {st} in {d}: {e.strerror or e}") from None
        step(profiler("summary-json", *view, "summary-json", stdout=os.path.join(d, f"{st}.summary.json")))
        step(profiler("summary-text", *view, "summary-text", stdout=os.path.join(d, f"{st}.summary.txt")))
        pftrace = os.path.join(d, f"{st}.pftrace")
        if (
            step(profiler("perfetto", *view, "perfetto", "--output-file", f"{st}.pftrace")) == 0
            and not dry
            and not os.path.exists(pftrace)
        ):
            # tool versions that ignore --output-file write one of these names
            others = sorted(glob.glob(os.path.join(d, "device_profile_model_*.pftrace")))
            for other in [os.path.join(d, "ntff.pftrace"), *others]:
                if os.path.exists(other):
                    try:
                        os.replace(other, pftrace)
                    except OSError as e:
                        raise ResultsWriteError(f"cannot rename {other}: {e.strerror or e}") from None
                    break
        summary, est = os.path.join(d, f"{st}.summary.json"), os.path.join(d, f"{st}.estimate.json")
        if not self.opts.no_estimate and (
            dry or (os.path.exists(summary) and os.path.getsize(summary) > 0 and os.path.exists(est))
        ):
            argv = env_argv(
                {"PYTHONPATH": self.ctx.pythonpath},
                self.ctx.python,
                "-m",
                "nki_kernels.hw.compare",
                f"{st}.summary.json",
                f"{st}.estimate.json",
                "--json",
                "compare.json",
            )
            step(Step(f"compare-{st}", "compare", argv, d, case.kernel, case.name))
        return failed

    def run_job(self, job: Job, ids: _Ids) -> int:
        """One job and, when it ends on its own, its progress line; the number of failed steps."""
        assert self.ctx is not None
        if self.manifest is not None:
            self.manifest.job_update(job.index, status="running")
        start = time.monotonic()
        if job.case is None:
            rc = self.run_step(self.path.check_step(self.ctx, job.kernel, job.core), ids, job.index)
            failed = int(rc not in (0, None))
        else:
            failed = self.case_job(job.case, job.core, ids, job.index)
        if self.opts.dry_run or self.manifest is None:
            return failed
        if self.stop.is_set():
            self.manifest.job_update(job.index, status="interrupted", failed_steps=failed)
            return failed
        self.manifest.job_update(job.index, status="failed" if failed else "ok", failed_steps=failed)
        verdict = f"FAILED ({failed} step(s), see above)" if failed else "ok"
        self.say(f"[{job.index}/{self.n_jobs}] {job.what} ... {verdict} {_took(time.monotonic() - start)}")
        return failed

    def worker(self, w: int, jobs: list[Job]) -> int:
        """The jobs of one core, one after another, until the run stops; the number of failed steps."""
        ids, failed = _Ids(f"w{w}"), 0
        try:
            for job in jobs:
                if self.stop.is_set():
                    break
                failed += self.run_job(job, ids)
        except ResultsWriteError as e:
            self.fault(str(e))
        except Exception as e:
            self.crash(e)
        return failed

    # -- the run
    def dry_run(self, pf: Preflight) -> int:
        o = self.opts
        print(f"{PROG} --dry-run: nothing is executed (only the read-only preflight probes ran).")
        print(pf.report())
        if pf.fails:
            print(f"(a real run would stop here with exit code {int(pf.exit_code())})")
        cores = pf.cores or core_ids(o.cores)  # without a device: the cores --cores names
        python = pf.python or os.path.join(pf.venv or DEFAULT_VENVS[0], "bin", "python")
        if not pf.api:
            print("(no usable SDK detected: showing the NKI 0.1 plan; an SDK >= 2.33 venv shows the NKI 0.7 one)")
        self.path = for_name(pf.api or "nki01")
        run = os.path.join(o.results_dir, run_id(self.git()[0]))
        self.ctx = self.context(python, run)
        jobs = plan(o, cores)
        print(
            f"plan: {len(jobs)} jobs on NeuronCore(s) {' '.join(cores)}, shapes '{o.shapes}', "
            f"kernels '{o.kernels}', path {self.path.name}"
        )
        if len(cores) > 1:  # how the jobs are spread: round-robin, one at a time per core
            for core in cores:
                mine = [str(j.index) for j in jobs if j.core == core]
                print(f"  core {core}: jobs {', '.join(mine) or '(none)'}")
        print(f"+ {shlex.join(['mkdir', '-p', o.results_dir])}")
        print(f"+ {shlex.join(['mkdir', run, *(os.path.join(run, s) for s in ('logs', 'hw_tests', 'env'))])}")
        if not o.skip_install:
            print(f"+ {shlex.join(self.install_step().argv)}")
        if o.skip_tests:
            print("# construct smoke test skipped (--skip-tests)")
        elif self.path.has_smoke_test(self.ctx):
            print("# construct smoke test first; the run stops if it fails")
            self.run_step(self.path.smoke_step(self.ctx, cores[0]), _Ids("m"))
        else:
            print(f"# construct smoke test skipped: {o.constructs_test} not found")
        for job in jobs:
            print(f"# job {job.index}/{len(jobs)} on core {job.core}: {job.what}")
            self.run_job(job, _Ids("w"))
        return Exit.OK

    def context(self, python: str, run: str) -> StepContext:
        o = self.opts
        return StepContext(
            python=python,
            pythonpath=self.pythonpath,
            run=run,
            shapes=o.shapes,
            timeout=o.timeout,
            warmup=o.warmup,
            iters=o.iters,
            constructs_test=o.constructs_test,
        )

    def install_step(self) -> Step:
        assert self.ctx is not None
        return Step(
            "install",
            "install",
            (self.ctx.python, "-m", "pip", "install", "--disable-pip-version-check", "-e", f"{ROOT}[test]"),
            ROOT,
        )

    @staticmethod
    def git() -> tuple[str, bool]:
        try:
            sha = subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=60
            )
            if sha.returncode != 0:
                return "nogit", False
            dirty = (
                subprocess.run(
                    ["git", "-C", ROOT, "status", "--porcelain"], capture_output=True, text=True, timeout=60
                ).stdout.strip()
                != ""
            )
            return sha.stdout.strip(), dirty
        except (OSError, subprocess.TimeoutExpired):
            return "nogit", False

    def make_run_folder(self, pf: Preflight) -> None:
        """A new folder under --results-dir (never an existing one) with env/; exits 17 when it fails."""
        o = self.opts
        try:
            os.makedirs(o.results_dir, exist_ok=True)
        except OSError as e:
            raise SetupError(f"cannot create {o.results_dir}: {e.strerror or e}") from None
        base = os.path.join(o.results_dir, run_id(self.git()[0]))
        for n in range(1, 100):
            run = base if n == 1 else f"{base}-{n}"
            try:
                os.mkdir(run)  # without exist_ok: a folder is never reused
                break
            except FileExistsError:
                continue
            except OSError as e:
                raise SetupError(f"cannot create {run}: {e.strerror or e}") from None
        else:
            raise SetupError(f"cannot create a new folder under {o.results_dir}")
        self.run_dir = run
        try:
            for sub in ("logs", "hw_tests", "env"):
                os.mkdir(os.path.join(run, sub))
            with open(os.path.join(run, "env", "neuron-ls.json"), "w", encoding="utf-8") as f:
                f.write(pf.neuron_ls_json)
            env = dict(os.environ, PYTHONPATH=self.pythonpath)
            with open(os.path.join(run, "logs", "sdk-info.log"), "wb") as log:
                for name, cmd in (("sdk.json", "nki_kernels.hw.env"), ("sdk_path.json", "nki_kernels.hw.sdk")):
                    with open(os.path.join(run, "env", name), "wb") as out:
                        rc = subprocess.run(
                            [pf.python, "-m", cmd, "sdk" if name == "sdk.json" else "info"],
                            env=env,
                            stdout=out,
                            stderr=log,
                            timeout=300,
                        ).returncode
                    if rc != 0:
                        with open(os.path.join(run, "env", name), "w", encoding="utf-8") as out2:
                            out2.write("{}\n")
        except (OSError, subprocess.TimeoutExpired) as e:
            why = getattr(e, "strerror", None) or e
            raise SetupError(
                f"cannot write the new results folder {run}: {why}; nothing was run (the folder is incomplete)"
            ) from None

    def environment(self, pf: Preflight) -> dict[str, Any]:
        env: dict[str, Any] = {
            "instance_type": pf.instance_type,
            "venv": pf.venv,
            "cores": " ".join(pf.cores),
            "aws_neuronx_tools": tools_version(),
            "nki_path": pf.api,
            "profiler": pf.profiler,
        }
        for key, name in (("sdk", "sdk.json"), ("sdk_path", "sdk_path.json"), ("neuron_ls", "neuron-ls.json")):
            path = os.path.join(self.run_dir, "env", name)
            try:
                with open(path, encoding="utf-8") as f:
                    env[key] = json.load(f)
            except (OSError, json.JSONDecodeError) as e:
                env[key] = {"error": f"could not read {path}: {e}"}
        return env

    def run(self) -> int:
        o = self.opts
        os.environ["PATH"] = os.environ.get("PATH", "") + os.pathsep + NEURON_BIN  # earlier PATH entries win
        self.environ = dict(self.environ, PATH=os.environ["PATH"])
        pf = preflight(o, self.environ)
        if o.dry_run:
            return self.dry_run(pf)
        if pf.fails:
            print(pf.report(), file=sys.stderr)
            code = pf.exit_code()
            print(
                f"{PROG}: preflight failed (exit {int(code)}); nothing was run. See '{PROG} --help'.", file=sys.stderr
            )
            return code
        sys.stdout = lifecycle.ClosedPipeGuard(sys.stdout, self.on_stdout_closed)
        print(pf.report(), flush=True)
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: a hangup is not an interruption
                signal.signal(sig, self.on_signal)
        if self.stop.is_set():  # stopped before the run folder exists: nothing to mark
            code, name = STOPS[self.signal or signal.SIGINT]
            self.say(f"[{PROG}] stopped by {name} before the run started; nothing was run", err=True)
            return code
        try:
            self.make_run_folder(pf)
        except SetupError as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return Exit.RESULTS
        self.path = for_name(pf.api)
        self.ctx = self.context(pf.python, self.run_dir)
        jobs = plan(o, pf.cores)
        self.n_jobs = len(jobs)
        self.manifest = Manifest(self.run_dir)
        sha, dirty = self.git()
        try:
            self.manifest.init(
                run_id=os.path.basename(self.run_dir),
                git_sha=sha,
                git_dirty=dirty,
                argv=[os.path.join(ROOT, "scripts", PROG), *o.argv],
                options={
                    "kernels": o.kernels,
                    "shapes": o.shapes,
                    "cores": o.cores,
                    "timeout": str(o.timeout),
                    "warmup": str(o.warmup),
                    "iters": str(o.iters),
                    "skip_install": str(int(o.skip_install)),
                    "skip_tests": str(int(o.skip_tests)),
                    "no_estimate": str(int(o.no_estimate)),
                },
                environment=self.environment(pf),
                jobs=[j.record() for j in jobs],
            )
        except ResultsWriteError as e:
            print(
                f"{PROG}: cannot write the new results folder {self.run_dir}: {e}; nothing was run "
                "(the folder is incomplete)",
                file=sys.stderr,
            )
            return Exit.RESULTS
        print(f"[{PROG}] results folder: {self.run_dir}", flush=True)
        try:
            return self.run_phases(pf, jobs)
        except ResultsWriteError as e:
            self.fault(str(e))
        except Exception as e:
            self.crash(e)
        return self.finalize(0)

    def run_phases(self, pf: Preflight, jobs: list[Job]) -> int:
        assert self.ctx is not None and self.manifest is not None
        o, main = self.opts, _Ids("m")
        if not o.skip_install:
            rc = self.run_step(self.install_step(), main)
            if rc not in (0, None):
                log = os.path.join(self.run_dir, "logs", f"{main.prefix}-{main.n:03d}-install.log")
                self.say(
                    f"{PROG}: installing the project into {pf.venv} failed (log: {log}); if the venv is not "
                    "writable, rerun with --skip-install",
                    err=True,
                )
                return self.finish_and_report("failed", Exit.INSTALL, f"installing the project into {pf.venv} failed")
        if self.stop.is_set():
            return self.finalize(0)

        # The construct smoke test: every NKI construct the kernels rely on, compiled and run once on
        # the device; a failure stops the run before any benchmark, naming the construct.
        if o.skip_tests:
            print(f"[{PROG}] construct smoke test skipped (--skip-tests)", flush=True)
        elif not self.path.has_smoke_test(self.ctx):
            print(f"[{PROG}] construct smoke test skipped: {o.constructs_test} not found", flush=True)
        else:
            rc = self.run_step(self.path.smoke_step(self.ctx, pf.cores[0]), main)
            if self.stop.is_set():
                return self.finalize(0)
            if rc != 0:
                log = os.path.join(self.run_dir, "logs", f"{main.prefix}-{main.n:03d}-constructs.log")
                failures = junit_failures(os.path.join(self.run_dir, "hw_tests", "constructs.junit.xml"))
                if not failures:  # pytest stopped before any test (no device, collection error)
                    failures = [f"(no test ran) {_last_line(log)}"]
                self.say(
                    "\n".join(
                        [
                            f"{PROG}: construct smoke test failed; nothing was benchmarked. Failed construct(s):",
                            *(f"  {f}" for f in failures),
                            f"  log: {log}",
                        ]
                    ),
                    err=True,
                )
                return self.finish_and_report("failed", Exit.CONSTRUCTS, f"construct smoke test failed: {failures[0]}")
            print(f"[{PROG}] construct smoke test passed", flush=True)

        # One worker per core, each running its jobs one after another.
        by_core: dict[str, list[Job]] = {}
        for job in jobs:
            by_core.setdefault(job.core, []).append(job)
        print(f"[{PROG}] {len(jobs)} jobs on NeuronCore(s) {' '.join(pf.cores)}", flush=True)
        failed = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(by_core)), thread_name_prefix="core") as ex:
            futures = [ex.submit(self.worker, pf.cores.index(core), js) for core, js in by_core.items()]
            pending = set(futures)
            while pending:
                _, pending = concurrent.futures.wait(pending, timeout=POLL_S)
            for f in futures:
                failed += f.result()
        return self.finalize(failed)

    def finalize(self, failed: int) -> int:
        """The run's end: failed (results fault or a bug), interrupted (a signal), or completed."""
        if self.fault_reason:
            return self.finish_fault()
        if self.crashed:
            return self.finish_and_report("failed", 1, self.crashed)
        if self.signal is not None:
            code, name = STOPS[self.signal]
            self.say(f"[{PROG}] interrupted by {name}; every running step was stopped; finished results kept", err=True)
            try:
                with open(os.path.join(self.run_dir, "INTERRUPTED"), "w", encoding="utf-8") as f:
                    f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + f" {name}\n")
            except OSError:
                pass
            return self.finish_and_report("interrupted", code, interruption=name)
        if failed:
            return self.finish_and_report("completed_with_failures", Exit.STEPS)
        return self.finish_and_report("completed", Exit.OK)

    def finish(self, status: str, code: int, reason: str = "", interruption: str = "") -> str:
        """Finalise manifest.json and SUMMARY.md; "" or why that failed."""
        assert self.manifest is not None
        try:
            self.manifest.finish(status, int(code), reason, interruption)
        except ResultsWriteError as e:
            return str(e)
        return ""

    def finish_and_report(self, status: str, code: int, reason: str = "", interruption: str = "") -> int:
        err = self.finish(status, code, reason, interruption)
        if err:
            self.say(
                f"{PROG}: {status}, but manifest.json could not be finalised ({err}); treat {self.run_dir} "
                "as incomplete",
                err=True,
            )
        else:
            self.say(f"[{PROG}] {status}: results in {self.run_dir} (manifest.json, SUMMARY.md)")
        return int(code)

    def finish_fault(self) -> int:
        reason = self.fault_reason
        err = self.finish("failed", Exit.RESULTS, reason)
        if err:
            self.say(
                f"{PROG}: cannot write results: {reason}; stopped every step; manifest.json could not be "
                f"finalised either; treat {self.run_dir} as incomplete",
                err=True,
            )
        else:
            self.say(
                f"{PROG}: cannot write results: {reason}; stopped every step; manifest.json marked failed "
                "(SUMMARY.md says why)",
                err=True,
            )
        return Exit.RESULTS


class SetupError(Exception):
    """The run folder could not be made (exit 17, nothing was run)."""


def run_id(sha: str) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{sha}"


def tools_version() -> str:
    """The aws-neuronx-tools package version (dpkg or rpm), or "unknown"."""
    for cmd in (
        ["dpkg-query", "-W", "-f=${Version}", "aws-neuronx-tools"],
        ["rpm", "-q", "--qf", "%{VERSION}", "aws-neuronx-tools"],
    ):
        if shutil.which(cmd[0]) is None:
            continue
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return "unknown"


def _last_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def main(argv: list[str] | None = None) -> int:
    """``python -m nki_kernels.hw.run [options]`` (what scripts/run_hw.sh runs)."""
    argv = sys.argv[1:] if argv is None else argv
    environ = dict(os.environ)
    try:
        # the NKI_* variables every entry point shares (NKI_BACKEND=neuron is right here), then ours
        environment.check(interpreter=False)
        opts = parse_args(argv, environ)
    except (UsageError, environment.EnvironmentUsageError) as e:
        print(f"{PROG}: {e} (see '{PROG} --help')", file=sys.stderr)
        return Exit.USAGE
    try:
        if opts is None:
            print(HELP, end="")
            code = int(Exit.OK)
        else:
            code = HardwareJob(opts, environ).run()
        sys.stdout.flush()  # here, not at exit: a closed pipe is then the BrokenPipeError below
        return code
    except KeyboardInterrupt:  # Ctrl-C during preflight, before the run folder exists
        print(f"{PROG}: interrupted during preflight; nothing was run", file=sys.stderr)
        return Exit.SIGINT
    except BrokenPipeError:  # `run_hw.sh --dry-run | grep -m1 ...`: the reader has what it wanted
        return lifecycle.stdout_closed()


if __name__ == "__main__":
    sys.exit(main())
