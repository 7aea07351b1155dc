"""neuron-profile commands: capture an NTFF from a NEFF, export summaries and a Perfetto trace.

The commands (aws-neuronx-tools, ``/opt/aws/neuron/bin``)::

    neuron-profile capture -n k.neff -s k.ntff
    neuron-profile view -n k.neff -s k.ntff --output-format summary-json   > k.summary.json
    neuron-profile view -n k.neff -s k.ntff --output-format summary-text   > k.summary.txt
    neuron-profile view -n k.neff -s k.ntff --output-format perfetto --output-file k.pftrace

``capture`` executes the NEFF on a NeuronCore (with all-zero inputs when none are given);
the summaries print to stdout; the ``.pftrace`` opens at https://ui.perfetto.dev next to
the cost model's Chrome-trace JSON.  ``scripts/run_hw.sh`` runs these same commands; the
functions here build them for Python callers and tests.
"""

from __future__ import annotations

import glob
import os
import subprocess
from dataclasses import dataclass

SUMMARY_FORMATS = {"summary-json": ".summary.json", "summary-text": ".summary.txt"}


def capture_cmd(neff: str, ntff: str, tool: str = "neuron-profile") -> list[str]:
    return [tool, "capture", "-n", neff, "-s", ntff]


def view_cmd(neff: str, ntff: str, fmt: str, output_file: str | None = None, tool: str = "neuron-profile") -> list[str]:
    allowed = ("summary-json", "summary-text", "perfetto", "json")
    if fmt not in allowed:
        raise ValueError(f"unknown --output-format {fmt!r}; allowed: {', '.join(allowed)}")
    cmd = [tool, "view", "-n", neff, "-s", ntff, "--output-format", fmt]
    if output_file:
        cmd += ["--output-file", output_file]
    return cmd


@dataclass
class ProfileFiles:
    """The artifacts of one profiled kernel case (paths; missing ones are None)."""

    neff: str
    ntff: str | None = None
    summary_json: str | None = None
    summary_text: str | None = None
    perfetto: str | None = None


def _run(
    cmd: list[str], cwd: str, stdout_path: str | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    if stdout_path:
        with open(stdout_path, "w", encoding="utf-8") as out:
            proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout)
    else:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[:500]}")
    return proc


def profile_neff(
    neff: str, stem: str | None = None, tool: str = "neuron-profile", timeout: float | None = None
) -> ProfileFiles:
    """Capture and export everything for one NEFF; files land next to it as ``<stem>.*``.

    Raises RuntimeError (with the tool's stderr) when a step fails.
    """
    folder = os.path.dirname(os.path.abspath(neff))
    stem = stem or os.path.splitext(os.path.basename(neff))[0]
    neff_name = os.path.basename(neff)
    ntff = f"{stem}.ntff"
    _run(capture_cmd(neff_name, ntff, tool), folder, timeout=timeout)
    files = ProfileFiles(neff=os.path.join(folder, neff_name), ntff=os.path.join(folder, ntff))
    for fmt, suffix in SUMMARY_FORMATS.items():
        path = os.path.join(folder, stem + suffix)
        _run(view_cmd(neff_name, ntff, fmt, tool=tool), folder, stdout_path=path, timeout=timeout)
        setattr(files, fmt.replace("-", "_"), path)
    files.perfetto = export_perfetto(neff_name, ntff, folder, stem, tool, timeout)
    return files


def export_perfetto(
    neff: str, ntff: str, folder: str, stem: str, tool: str = "neuron-profile", timeout: float | None = None
) -> str:
    """Write ``<stem>.pftrace``.  Some tool versions ignore ``--output-file`` and write
    ``ntff.pftrace`` in the working directory; that file is renamed."""
    target = os.path.join(folder, f"{stem}.pftrace")
    before = set(glob.glob(os.path.join(folder, "*.pftrace")))
    _run(view_cmd(neff, ntff, "perfetto", f"{stem}.pftrace", tool), folder, timeout=timeout)
    if not os.path.exists(target):
        new = sorted(set(glob.glob(os.path.join(folder, "*.pftrace"))) - before)
        if len(new) != 1:
            raise RuntimeError(
                f"neuron-profile perfetto export wrote {len(new)} new .pftrace files in {folder}, expected 1"
            )
        os.replace(new[0], target)
    return target
