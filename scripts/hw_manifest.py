#!/usr/bin/env python3
"""Keep the manifest of a ``scripts/run_hw.sh`` results folder (standard library only).

    hw_manifest.py init       --dir RUN --run-id ID [--git-sha S] [--git-dirty 0|1]
                              [--option K=V ...] [--env K=V ...] [--env-json K=FILE ...] -- ARGV...
    hw_manifest.py step-start --dir RUN --id ID --name NAME --phase PHASE --log LOG
                              [--kernel K] [--case C] [--core N] -- COMMAND...
    hw_manifest.py step-end   --dir RUN --id ID --rc RC
    hw_manifest.py finish     --dir RUN --status completed|interrupted|failed --exit-code N [--reason TEXT]
    hw_manifest.py junit-failures FILE.xml   (one line per failed/errored test: name: message)

Each step is its own file ``RUN/steps/<id>.json`` (parallel workers never write the same
file); ``RUN/manifest.json`` is rebuilt from them after every change and replaced
atomically, so it is always valid JSON.  ``finish`` lists every file with its size,
marks steps still running as ``interrupted`` and writes ``RUN/SUMMARY.md``.

A file that cannot be written (disk full, read-only folder) is one line on stderr,
``hw_manifest.py: cannot write PATH: REASON``, exit code 3, and no temporary file is left.
"""
from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import sys

SCHEMA = "nki-kernels-hw-run/1"
BASE = ".manifest-base.json"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


E_WRITE = 3


class WriteError(Exception):
    """A results file could not be written; the message names the file and the reason."""


def write_text(path: str, text: str) -> None:
    """Write ``path`` atomically (temporary file + rename); on failure remove the temporary file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriteError(f"cannot write {path}: {e.strerror or e}") from None


def write_json(path: str, obj) -> None:
    write_text(path, json.dumps(obj, indent=2) + "\n")


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _pairs(items):
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"hw_manifest.py: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def load_steps(run: str) -> list[dict]:
    steps = []
    for path in glob.glob(os.path.join(run, "steps", "*.json")):
        try:
            steps.append(read_json(path))
        except (OSError, json.JSONDecodeError):
            continue  # a step file being replaced right now; the next rebuild sees it
    steps.sort(key=lambda s: (s.get("started_utc", ""), s.get("id", "")))
    return steps


def list_files(run: str) -> list[dict]:
    files = []
    for root, dirs, names in os.walk(run):
        dirs[:] = [d for d in dirs if d != "steps"]
        for name in names:
            if name.endswith(".tmp") or name == BASE:
                continue
            path = os.path.join(root, name)
            files.append({"path": os.path.relpath(path, run), "bytes": os.path.getsize(path)})
    return sorted(files, key=lambda f: f["path"])


def rebuild(run: str) -> dict:
    manifest = read_json(os.path.join(run, BASE))
    steps = load_steps(run)
    counts: dict[str, int] = {}
    for s in steps:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    manifest.update(steps=steps, step_counts=counts, updated_utc=utc_now())
    if manifest.get("status") != "running":
        manifest["files"] = list_files(run)
    write_json(os.path.join(run, "manifest.json"), manifest)
    return manifest


def cmd_init(a) -> int:
    try:
        os.makedirs(os.path.join(a.dir, "steps"), exist_ok=True)
    except OSError as e:
        raise WriteError(f"cannot create {os.path.join(a.dir, 'steps')}: {e.strerror or e}") from None
    env = _pairs(a.env)
    for key, path in _pairs(a.env_json).items():
        try:
            env[key] = read_json(path)
        except (OSError, json.JSONDecodeError) as e:
            env[key] = {"error": f"could not read {path}: {e}"}
    base = {
        "schema": SCHEMA, "run_id": a.run_id, "status": "running", "exit_code": None,
        "started_utc": utc_now(), "finished_utc": None,
        "git": {"sha": a.git_sha, "dirty": a.git_dirty == "1"},
        "argv": a.argv, "options": _pairs(a.option), "environment": env,
        "note": "hardware measurements from this run only; cost-model numbers are estimates",
    }
    write_json(os.path.join(a.dir, BASE), base)
    rebuild(a.dir)
    return 0


def _step_path(run: str, step_id: str) -> str:
    return os.path.join(run, "steps", f"{step_id}.json")


def cmd_step_start(a) -> int:
    step = {"id": a.id, "name": a.name, "phase": a.phase, "kernel": a.kernel, "case": a.case,
            "core": a.core, "command": a.command, "log": a.log, "status": "running",
            "exit_code": None, "started_utc": utc_now(), "finished_utc": None, "seconds": None}
    write_json(_step_path(a.dir, a.id), step)  # manifest.json is rebuilt when the step ends
    return 0


def status_for(rc: int) -> str:
    if rc == 0:
        return "passed"
    if rc == 124:
        return "timeout"  # GNU timeout's exit code
    if rc in (130, 143):
        return "interrupted"
    return "failed"


def cmd_step_end(a) -> int:
    path = _step_path(a.dir, a.id)
    step = read_json(path)
    now = utc_now()
    step.update(status=status_for(a.rc), exit_code=a.rc, finished_utc=now,
                seconds=(_parse_time(now) - _parse_time(step["started_utc"])).total_seconds())
    write_json(path, step)
    rebuild(a.dir)
    return 0


# How each path measures latency (bench.json "api"; records without it are NKI 0.1).
_LATENCY_METHOD = {
    "nki-0.1": "nki.benchmark (NKI 0.1 path)",
    "nki-0.7": "device time of profiled executions, neuron-explorer (NKI 0.7 path)",
}


def _bench_rows(run: str, methods: set | None = None) -> list[str]:
    rows = []
    for path in sorted(glob.glob(os.path.join(run, "*", "*", "bench.json"))):
        try:
            b = read_json(path)
        except (OSError, json.JSONDecodeError):
            continue
        if methods is not None:
            methods.add(_LATENCY_METHOD.get(b.get("api", "nki-0.1"), b.get("api")))
        cs = b.get("cs149") or {}
        est = b.get("vs_estimate") or {}
        ratio = f"{est['ratio_p50']:.2f}" if "ratio_p50" in est else "-"
        rows.append(f"| {b['kernel']} | {b['case']} | {b['p50_us']:.1f} | {b['p99_us']:.1f} | "
                    f"{cs.get('verdict', '-')} | {ratio} | {b.get('core') or '-'} |")
    return rows


def write_summary(run: str, manifest: dict) -> None:
    counts = manifest.get("step_counts", {})
    lines = [
        f"# Hardware run {manifest['run_id']}",
        "",
        f"- status: **{manifest['status']}** (exit code {manifest['exit_code']})",
        f"- started {manifest['started_utc']}, finished {manifest['finished_utc']}",
        f"- git {manifest['git']['sha']}{' (dirty)' if manifest['git']['dirty'] else ''}",
        "- steps: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"),
        "",
    ]
    if manifest.get("failure_reason"):
        lines += [f"The run stopped: {manifest['failure_reason']}", ""]
    if manifest["status"] == "interrupted":
        lines += ["The run was interrupted: finished steps and their files are intact; steps "
                  "marked `interrupted` did not complete.", ""]
    methods: set = set()
    bench = _bench_rows(run, methods)
    if bench:
        lines += [f"## Latency (microseconds; {', '.join(sorted(methods))})", "",
                  "| kernel | case | p50 | p99 | CS149 threshold | p50 / estimate | core |",
                  "|---|---|---|---|---|---|---|", *bench, "",
                  "Measured on this machine; the estimate ratio compares with the cost model "
                  "(an estimate). Thresholds are reported, not asserted.", ""]
    bad = [s for s in manifest.get("steps", []) if s["status"] not in ("passed",)]
    if bad:
        lines += ["## Steps that did not pass", ""]
        lines += [f"- `{s['name']}`: {s['status']} (exit {s['exit_code']}), log `{s['log']}`" for s in bad]
        lines.append("")
    profiles = sorted(glob.glob(os.path.join(run, "*", "*", "*.ntff")))
    if profiles:
        lines += ["## Profiles", "",
                  "Per case folder: `<stem>.neff`, `<stem>.ntff`, `<stem>.summary.json|txt`, "
                  "`<stem>.pftrace` (open at https://ui.perfetto.dev), and when estimated "
                  "`<stem>.estimate.trace.json` (the cost model's timeline, same UI) and "
                  "`compare.json`. Open a capture with "
                  "`neuron-profile view -n <stem>.neff -s <stem>.ntff` (or `neuron-explorer`).", ""]
        lines += [f"- `{os.path.relpath(p, run)}`" for p in profiles]
        lines.append("")
    write_text(os.path.join(run, "SUMMARY.md"), "\n".join(lines))


def cmd_finish(a) -> int:
    now = utc_now()
    for step in load_steps(a.dir):
        if step["status"] == "running":
            step.update(status="interrupted" if a.status == "interrupted" else "unfinished",
                        finished_utc=now)
            write_json(_step_path(a.dir, step["id"]), step)
    base_path = os.path.join(a.dir, BASE)
    base = read_json(base_path)
    base.update(status=a.status, exit_code=a.exit_code, finished_utc=now)
    if a.reason:
        base["failure_reason"] = a.reason
    write_json(base_path, base)
    manifest = rebuild(a.dir)
    write_summary(a.dir, manifest)
    rebuild(a.dir)  # list SUMMARY.md among the files
    return 0


def cmd_junit_failures(a) -> int:
    """Print ``classname::name: message`` for every failed or errored test of a JUnit XML file."""
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(a.file).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"(no readable JUnit report {a.file}: {e})")
        return 1
    for case in root.iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            msg = (bad.get("message") or bad.text or "").strip().splitlines()
            raised = [ln[1:].strip() for ln in (bad.text or "").splitlines() if ln.startswith("E ")]
            if bad.tag == "error" and raised:   # e.g. "collection failure": say what was raised
                msg = [f"{msg[0] if msg else 'error'}: {raised[-1]}"]
            name = case.get("name", "?")
            cls = case.get("classname", "")
            print(f"{cls + '::' if cls else ''}{name}: {msg[0][:300] if msg else bad.tag}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("init")
    p.add_argument("--dir", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--git-sha", default="unknown")
    p.add_argument("--git-dirty", default="0")
    p.add_argument("--option", action="append")
    p.add_argument("--env", action="append")
    p.add_argument("--env-json", action="append")
    p.add_argument("argv", nargs="*")
    p = sub.add_parser("step-start")
    for opt in ("--dir", "--id", "--name", "--phase", "--log"):
        p.add_argument(opt, required=True)
    p.add_argument("--kernel")
    p.add_argument("--case")
    p.add_argument("--core")
    p.add_argument("command", nargs="+")
    p = sub.add_parser("step-end")
    p.add_argument("--dir", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("finish")
    p.add_argument("--dir", required=True)
    p.add_argument("--status", required=True,
                   choices=["completed", "completed_with_failures", "interrupted", "failed"])
    p.add_argument("--exit-code", type=int, required=True)
    p.add_argument("--reason", default="", help="why the run stopped (written to manifest and SUMMARY.md)")
    p = sub.add_parser("junit-failures")
    p.add_argument("file")
    a = ap.parse_args(argv)
    try:
        return {"init": cmd_init, "step-start": cmd_step_start, "step-end": cmd_step_end,
                "finish": cmd_finish, "junit-failures": cmd_junit_failures}[a.cmd](a)
    except WriteError as e:
        print(f"hw_manifest.py: {e}", file=sys.stderr)
        return E_WRITE


if __name__ == "__main__":
    sys.exit(main())
