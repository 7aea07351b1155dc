#!/usr/bin/env bash
# run_hw.sh: the nki-kernels hardware job for a trn2 DLAMI (NKI 0.1 kernels on Neuron SDK
# 2.26/2.27, NKI 0.7 kernels on SDK >= 2.33).  This file only finds a Python and starts the job,
# nki_kernels/hw/run.py; `scripts/run_hw.sh --help` lists what it does, every option and exit
# code; docs/hardware.md is the runbook.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The job needs only the standard library of a Python >= 3.10; its steps run in the Neuron venv
# it finds at preflight.  Start it with that venv's Python when one is named (--venv, or an
# activated venv), else with python3 from PATH.
usable() { [[ -n $1 && -x $1 ]] && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; }

venv=""
prev=""
for arg in "$@"; do
  case $arg in
    --venv=*) venv=${arg#--venv=} ;;
    *) if [[ $prev == --venv ]]; then venv=$arg; fi ;;
  esac
  prev=$arg
done

py=""
for candidate in "${venv:+$venv/bin/python}" "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" \
                 "$(command -v python3 || true)"; do
  if usable "$candidate"; then py=$candidate; break; fi
done
if [[ -z $py ]]; then
  echo "run_hw.sh: no Python >= 3.10 found (tried --venv, \$VIRTUAL_ENV and python3 on PATH)" >&2
  exit 13
fi

# This checkout first, whatever is installed; the job passes the same PYTHONPATH to its steps.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m nki_kernels.hw.run "$@"
