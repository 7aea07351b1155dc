"""The manifest of a hardware-job results folder, kept in the job's own process (standard library only).

``RUN/manifest.json`` holds the run's options, environment, every planned job (from the start, so
a job that never ran is listed as ``not started``) and every step (command, log, exit code, status,
timings).  It is rewritten atomically (temporary file + rename) after every change, so it is always
valid JSON; :meth:`Manifest.finish` lists every file with its size and writes ``RUN/SUMMARY.md``.

A file that cannot be written (disk full, read-only folder) raises :class:`ResultsWriteError`, whose
message is one line, ``cannot write PATH: REASON``; no temporary file is left behind.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import threading
import xml.etree.ElementTree as ET
from typing import Any

SCHEMA = "nki-kernels-hw-run/1"
JOB_STATUSES = ("planned", "running", "ok", "failed", "interrupted", "not started")


class ResultsWriteError(Exception):
    """A results file could not be written; the message names the file and the reason."""


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


def write_text(path: str, text: str) -> None:
    """Write ``path`` atomically; on failure remove the temporary file and raise ResultsWriteError."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ResultsWriteError(f"cannot write {path}: {e.strerror or e}") from None


def status_for(rc: int) -> str:
    """A step's status from its exit code (124: the step's time limit, 128 + signal: stopped)."""
    if rc == 0:
        return "passed"
    if rc == 124:
        return "timeout"
    if rc in (129, 130, 137, 143):
        return "interrupted"
    return "failed"


def list_files(run: str) -> list[dict[str, Any]]:
    files = []
    for root, _dirs, names in os.walk(run):
        for name in names:
            if name.endswith(".tmp"):
                continue
            path = os.path.join(root, name)
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            files.append({"path": os.path.relpath(path, run), "bytes": size})
    return sorted(files, key=lambda f: f["path"])


def junit_failures(path: str) -> list[str]:
    """``classname::name: message`` for every failed or errored test of a JUnit XML file ([] when
    the file is missing or unreadable: the caller says why instead)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for case in root.iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            msg = (bad.get("message") or bad.text or "").strip().splitlines()
            raised = [ln[1:].strip() for ln in (bad.text or "").splitlines() if ln.startswith("E ")]
            if bad.tag == "error" and raised:  # e.g. "collection failure": say what was raised
                msg = [f"{msg[0] if msg else 'error'}: {raised[-1]}"]
            name = case.get("name", "?")
            cls = case.get("classname", "")
            out.append(f"{cls + '::' if cls else ''}{name}: {msg[0][:300] if msg else bad.tag}")
    return out


class Manifest:
    """``RUN/manifest.json`` in memory, written after every change (thread-safe)."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.path = os.path.join(run, "manifest.json")
        self._lock = threading.RLock()
        self.data: dict[str, Any] = {}

    def _write(self) -> None:
        self.data["updated_utc"] = utc_now()
        steps = self.data.get("steps", [])
        counts: dict[str, int] = {}
        for s in steps:
            counts[s["status"]] = counts.get(s["status"], 0) + 1
        self.data["step_counts"] = counts
        write_text(self.path, json.dumps(self.data, indent=2) + "\n")

    def init(
        self,
        *,
        run_id: str,
        git_sha: str,
        git_dirty: bool,
        argv: list[str],
        options: dict[str, str],
        environment: dict[str, Any],
        jobs: list[dict[str, Any]],
    ) -> None:
        """The running manifest: options, environment and every planned job (status ``planned``)."""
        with self._lock:
            self.data = {
                "schema": SCHEMA,
                "run_id": run_id,
                "status": "running",
                "exit_code": None,
                "started_utc": utc_now(),
                "finished_utc": None,
                "git": {"sha": git_sha, "dirty": git_dirty},
                "argv": argv,
                "options": options,
                "environment": environment,
                "note": "hardware measurements from this run only; cost-model numbers are estimates",
                "jobs": [
                    dict(j, status="planned", started_utc=None, finished_utc=None, seconds=None, failed_steps=0)
                    for j in jobs
                ],
                "steps": [],
            }
            self._write()

    def step_start(
        self,
        *,
        step_id: str,
        name: str,
        phase: str,
        log: str,
        kernel: str,
        case: str,
        core: str,
        command: list[str],
        job: int | None = None,
    ) -> None:
        with self._lock:
            self.data["steps"].append(
                {
                    "id": step_id,
                    "name": name,
                    "phase": phase,
                    "job": job,
                    "kernel": kernel,
                    "case": case,
                    "core": core,
                    "command": command,
                    "log": log,
                    "status": "running",
                    "exit_code": None,
                    "started_utc": utc_now(),
                    "finished_utc": None,
                    "seconds": None,
                }
            )
            self._write()

    def step_end(self, step_id: str, rc: int, *, status: str | None = None, note: str = "") -> None:
        """Record a step's exit code; ``status`` overrides the one its exit code implies."""
        with self._lock:
            step = next(s for s in self.data["steps"] if s["id"] == step_id)
            now = utc_now()
            step.update(
                status=status or status_for(rc),
                exit_code=rc,
                finished_utc=now,
                seconds=(_parse_time(now) - _parse_time(step["started_utc"])).total_seconds(),
            )
            if note:
                step["note"] = note
            self._write()

    def job_update(self, index: int, *, status: str, failed_steps: int = 0) -> None:
        with self._lock:
            job = self.data["jobs"][index - 1]
            now = utc_now()
            if status == "running":
                job.update(status=status, started_utc=now)
            else:
                job.update(
                    status=status,
                    finished_utc=now,
                    failed_steps=failed_steps,
                    seconds=(
                        (_parse_time(now) - _parse_time(job["started_utc"])).total_seconds()
                        if job["started_utc"]
                        else None
                    ),
                )
            self._write()

    def finish(self, status: str, exit_code: int, reason: str = "", interruption: str = "") -> None:
        """Final status and exit code; steps still running become ``interrupted`` (their exit code
        unknown, said so), jobs that never started ``not started``; lists the files; SUMMARY.md."""
        with self._lock:
            now = utc_now()
            for step in self.data["steps"]:
                if step["status"] == "running":
                    step.update(
                        status="interrupted" if status == "interrupted" else "unfinished",
                        finished_utc=now,
                        note="still running when the run stopped: no exit code",
                    )
            for job in self.data["jobs"]:
                if job["status"] == "planned":
                    job["status"] = "not started"
                elif job["status"] == "running":
                    job.update(status="interrupted", finished_utc=now)
            self.data.update(status=status, exit_code=exit_code, finished_utc=now)
            if reason:
                self.data["failure_reason"] = reason
            if interruption:
                self.data["interruption"] = interruption
            self.data["files"] = list_files(self.run)
            self._write()
            write_text(os.path.join(self.run, "SUMMARY.md"), summary_text(self.run, self.data))
            self.data["files"] = list_files(self.run)  # SUMMARY.md among them
            self._write()


# How each path measures latency (bench.json "api"; records without it are NKI 0.1).
_LATENCY_METHOD = {
    "nki-0.1": "nki.benchmark (NKI 0.1 path)",
    "nki-0.7": "device time of profiled executions, neuron-explorer (NKI 0.7 path)",
}


def _bench_rows(run: str, methods: set[str]) -> list[str]:
    rows = []
    for path in sorted(glob.glob(os.path.join(run, "*", "*", "bench.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                b = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        methods.add(_LATENCY_METHOD.get(b.get("api", "nki-0.1"), str(b.get("api"))))
        cs = b.get("cs149") or {}
        est = b.get("vs_estimate") or {}
        ratio = f"{est['ratio_p50']:.2f}" if "ratio_p50" in est else "-"
        rows.append(
            f"| {b['kernel']} | {b['case']} | {b['p50_us']:.1f} | {b['p99_us']:.1f} | "
            f"{cs.get('verdict', '-')} | {ratio} | {b.get('core') or '-'} |"
        )
    return rows


def _step_outcome(s: dict[str, Any]) -> str:
    if s["exit_code"] is None:
        return f"{s['status']} ({s.get('note') or 'no exit code'})"
    if s["status"] == "interrupted":
        return f"interrupted (stopped by the run, exit {s['exit_code']})"
    if s["status"] == "timeout":
        return f"timeout (its time limit, exit {s['exit_code']})"
    return f"{s['status']} (exit {s['exit_code']})"


def summary_text(run: str, m: dict[str, Any]) -> str:
    """SUMMARY.md of a finished run."""
    counts = m.get("step_counts", {})
    jobs = m.get("jobs", [])
    job_counts: dict[str, int] = {}
    for j in jobs:
        job_counts[j["status"]] = job_counts.get(j["status"], 0) + 1
    lines = [
        f"# Hardware run {m['run_id']}",
        "",
        f"- status: **{m['status']}** (exit code {m['exit_code']})",
        f"- started {m['started_utc']}, finished {m['finished_utc']}",
        f"- git {m['git']['sha']}{' (dirty)' if m['git']['dirty'] else ''}",
        "- jobs: " + (", ".join(f"{n} {k}" for k, n in sorted(job_counts.items())) or "none"),
        "- steps: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"),
        "",
    ]
    if m.get("failure_reason"):
        lines += [f"The run stopped: {m['failure_reason']}", ""]
    if m["status"] == "interrupted":
        stopped = sum(1 for s in m.get("steps", []) if s["status"] == "interrupted")
        lines += [
            f"The run was interrupted by {m.get('interruption') or 'a signal'} (exit code {m['exit_code']}): "
            f"finished steps and their files are intact; {stopped} running step(s) were stopped (marked "
            f"`interrupted`) and {job_counts.get('not started', 0)} job(s) never started (marked "
            "`not started` in manifest.json).",
            "",
        ]
    methods: set[str] = set()
    bench = _bench_rows(run, methods)
    if bench:
        lines += [
            f"## Latency (microseconds; {', '.join(sorted(methods))})",
            "",
            "| kernel | case | p50 | p99 | CS149 threshold | p50 / estimate | core |",
            "|---|---|---|---|---|---|---|",
            *bench,
            "",
            "Measured on this machine; the estimate ratio compares with the cost model "
            "(an estimate). Thresholds are reported, not asserted.",
            "",
        ]
    bad = [s for s in m.get("steps", []) if s["status"] != "passed"]
    if bad:
        lines += ["## Steps that did not pass", ""]
        lines += [f"- `{s['name']}`: {_step_outcome(s)}, log `{s['log']}`" for s in bad]
        lines.append("")
    never = [j for j in jobs if j["status"] == "not started"]
    if never:
        lines += ["## Jobs that never started", ""]
        lines += [f"- [{j['index']}/{len(jobs)}] {j['what']} (core {j['core']})" for j in never]
        lines.append("")
    profiles = sorted(glob.glob(os.path.join(run, "*", "*", "*.ntff")))
    if profiles:
        lines += [
            "## Profiles",
            "",
            "Per case folder: `<stem>.neff`, `<stem>.ntff`, `<stem>.summary.json|txt`, "
            "`<stem>.pftrace` (open at https://ui.perfetto.dev), and when estimated "
            "`<stem>.estimate.trace.json` (the cost model's timeline, same UI) and "
            "`compare.json`. Open a capture with "
            "`neuron-profile view -n <stem>.neff -s <stem>.ntff` (or `neuron-explorer`).",
            "",
        ]
        lines += [f"- `{os.path.relpath(p, run)}`" for p in profiles]
        lines.append("")
    return "\n".join(lines)
