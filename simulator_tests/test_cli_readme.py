"""The README's command table (Quickstart) against the commands' own --help: every subcommand has a
row, every option a subcommand takes is in its row's synopsis, and every flag a row names exists
(with the same choices where the row lists them).  The table had drifted: `sim-bench [--iters]`,
`verify --no-estimate`, `run --api` and most of `profile`'s options were missing."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from nki_kernels import commands

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DEV_ONLY = {"test", "install-extra"}


def _rows() -> dict[str, str]:
    """command -> the synopsis in the first cell of its row (`| `verify [--quick] ...` | ...`)."""
    quick = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in quick.splitlines():
        m = re.match(r"^\| `([^`]+)` \|", line)
        if m:
            synopsis = m.group(1).replace("\\|", "|")
            rows[synopsis.split()[0]] = synopsis
    return rows


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = commands.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_has_a_row_and_every_row_a_command():
    assert set(_rows()) == set(_subparsers()) | DEV_ONLY


@pytest.mark.parametrize("cmd", sorted(_subparsers()))
def test_a_rows_synopsis_names_exactly_the_options_of_its_help(cmd: str):
    synopsis = _rows()[cmd]
    actions = [a for a in _subparsers()[cmd]._actions if a.option_strings and "--help" not in a.option_strings]
    named = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", synopsis))
    for action in actions:
        assert named & set(action.option_strings), f"README's `{cmd}` row lacks {action.option_strings[-1]}"
        listed = re.search(rf"(?:{'|'.join(map(re.escape, action.option_strings))}) ([\w.]+(?:\|[\w.]+)+)", synopsis)
        if listed and action.choices is not None:
            assert set(listed.group(1).split("|")) == set(action.choices), (cmd, action.option_strings)
    known = {o for a in actions for o in a.option_strings}
    assert named <= known, f"README's `{cmd}` row names {sorted(named - known)}, which `{cmd} --help` does not have"


def test_the_help_text_says_what_the_row_says_for_the_bounds():
    """The bounds the table states are the parser's."""
    subs = _subparsers()
    assert "at most 64" in subs["verify"].format_help() and "at most 64" in _rows_text("verify")
    assert "1..100,000" in subs["sim-bench"].format_help() and "at most 100,000" in _rows_text("sim-bench")


def _rows_text(cmd: str) -> str:
    quick = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return next(line for line in quick.splitlines() if line.startswith(f"| `{cmd}"))
