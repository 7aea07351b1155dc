#!/usr/bin/env bash
# run_hw.sh: the nki-kernels hardware job for a trn2 DLAMI: the NKI 0.1 kernels on Neuron SDK
# 2.26/2.27, the NKI 0.7 kernels on SDK >= 2.33 (picked from the installed SDK).
# Run `scripts/run_hw.sh --help` for what it does; docs/hardware.md is the runbook.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROG="run_hw.sh"

# Exit codes (documented in --help and docs/hardware.md).
readonly E_USAGE=2 E_INSTANCE=10 E_DEVICE=11 E_SDK=12 E_VENV=13 E_CORES=14 E_PROFILER=15
readonly E_INSTALL=16 E_RESULTS=17 E_SDK_REFUSED=18 E_CONSTRUCTS=19 E_STEPS=20

usage() {
  cat <<EOF
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
  --cores N|LIST     N >= 1 = use N free NeuronCores; LIST = core ids such as 0-3 or 0,8.
                     Independent jobs are spread over them with NEURON_RT_VISIBLE_CORES,
                     one job per core at a time (default: 1)
  --timeout SECONDS  limit for every single step (default: 1800)
  --warmup N         warm-up executions per benchmark (default: 10)
  --iters N          measured executions per benchmark (default: 100)
  --venv PATH        Neuron Python venv (default: \$VIRTUAL_ENV if it has neuronx-cc or nki,
                     else the first of /opt/aws_neuronx_venv_pytorch_2_8, _2_9, _*)
  --results-dir DIR  parent of the run folder (default: <repo>/results)
  --skip-install     do not pip-install the project (it is still found via PYTHONPATH)
  --skip-tests       do not run hw_tests, nor the construct smoke test (benchmarks and profiles only)
  --no-estimate      skip the cost-model estimate and the profile-vs-estimate comparison
  --dry-run          run the read-only preflight probes, list their failures, print every
                     command the job would run, run nothing, exit 0
  -h, --help         show this help and exit 0

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
  17  the results folder could not be created or written (disk full, read-only); the
      manifest is marked "failed" with the reason when it can still be written
  18  the SDK is refused: 2.30-2.32, where neuronxcc.nki kernels no longer compile or
      silently misbehave and NKI is older than 0.7 (fix: a 2.26/2.27 or >= 2.33 DLAMI)
  19  the construct smoke test failed (hw_tests/test_constructs.py on the NKI 0.1 path,
      nki_kernels/kernels/smoke_nki07.py on the NKI 0.7 path); nothing was benchmarked
  20  the run finished but some step failed (see SUMMARY.md and logs/)
  130 interrupted by SIGINT (Ctrl-C)
  143 interrupted by SIGTERM
      (on 130/143 every running step -- its whole process group -- is stopped and waited
      for, finished results are kept, the manifest says "interrupted" and an INTERRUPTED
      file marks the folder)

Progress: one line per job as it ends, e.g. "[3/18] conv2d b1_ci256_co256_... ok 0:41".
When several preflight checks fail, the code is that of the first in the order
10, 11, 15, 13, 12, 18, 14; all failures are printed.

Environment: NKI_HW_PRODUCT_NAME_FILE (default /sys/devices/virtual/dmi/id/product_name),
NKI_HW_VENV_CANDIDATES (space-separated venv paths to try), NKI_HW_KERNEL_<NAME>
(module:function of an alternative kernel, e.g. a CS149 solution), NKI_HW_CONSTRUCTS_TEST
(the construct smoke test file, default hw_tests/test_constructs.py), NKI_HW_STOP_GRACE
(seconds a stopped step gets between SIGTERM and SIGKILL, default 10).
EOF
}

die_usage() { echo "$PROG: $*" >&2; echo "Try '$PROG --help'." >&2; exit "$E_USAGE"; }

# ---------------------------------------------------------------- arguments
KERNELS=all SHAPES=quick CORES=1 TIMEOUT=1800 WARMUP=10 ITERS=100
VENV="" RESULTS_ROOT="$ROOT/results" SKIP_INSTALL=0 SKIP_TESTS=0 NO_ESTIMATE=0 DRY_RUN=0
ORIG_ARGS=("$@")

while (($#)); do
  opt=$1 val=""
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*} ;;
  esac
  case $opt in
    -h|--help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1; shift; continue ;;
    --skip-install) SKIP_INSTALL=1; shift; continue ;;
    --skip-tests) SKIP_TESTS=1; shift; continue ;;
    --no-estimate) NO_ESTIMATE=1; shift; continue ;;
    --kernels|--shapes|--cores|--timeout|--warmup|--iters|--venv|--results-dir)
      if [[ -z $val ]]; then
        (($# >= 2)) || die_usage "$opt needs a value"
        val=$2; shift
      fi
      shift ;;
    *) die_usage "unknown option '$opt'" ;;
  esac
  case $opt in
    --kernels) KERNELS=$val ;;
    --shapes) SHAPES=$val ;;
    --cores) CORES=$val ;;
    --timeout) TIMEOUT=$val ;;
    --warmup) WARMUP=$val ;;
    --iters) ITERS=$val ;;
    --venv) VENV=$val ;;
    --results-dir) RESULTS_ROOT=$val ;;
  esac
done

KERNELS=${KERNELS// /}
case $SHAPES in quick|cs149|full) ;; *) die_usage "--shapes must be quick, cs149 or full, got '$SHAPES'" ;; esac
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die_usage "--timeout must be a positive number of seconds, got '$TIMEOUT'"
[[ $WARMUP =~ ^[0-9]+$ ]] || die_usage "--warmup must be a non-negative integer, got '$WARMUP'"
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die_usage "--iters must be a positive integer, got '$ITERS'"
[[ $CORES =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] || die_usage "--cores must be a count (4) or core ids (0-3, 0,8), got '$CORES'"
if [[ $CORES =~ ^[0-9]+$ ]]; then
  ((10#$CORES >= 1)) || die_usage "--cores must be a count >= 1 or core ids (0-3, 0,8), got '$CORES'"
else
  IFS=',' read -r -a _core_parts <<<"$CORES"
  for _part in "${_core_parts[@]}"; do
    if [[ $_part == *-* ]] && ((10#${_part%-*} > 10#${_part#*-})); then
      die_usage "--cores range '$_part' runs backwards; write it low-high (e.g. 0-3)"
    fi
  done
fi
STOP_GRACE=${NKI_HW_STOP_GRACE:-10}
[[ $STOP_GRACE =~ ^[0-9]+$ ]] || die_usage "NKI_HW_STOP_GRACE must be a whole number of seconds, got '$STOP_GRACE'"
CONSTRUCTS_TEST=${NKI_HW_CONSTRUCTS_TEST:-$ROOT/hw_tests/test_constructs.py}

SHAPES_PY="$ROOT/nki_kernels/hw/shapes.py"
ENV_PY="$ROOT/nki_kernels/hw/env.py"
SDK_PY="$ROOT/nki_kernels/hw/sdk.py"
PYPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"   # this checkout first, whatever is installed
MANIFEST_PY="$ROOT/scripts/hw_manifest.py"

# The case list needs only the standard library, so any Python 3 can print it.
PLAN_PY=python3
if [[ -n $VENV && -x $VENV/bin/python ]]; then PLAN_PY=$VENV/bin/python; fi
plan=$("$PLAN_PY" "$SHAPES_PY" --kernels "$KERNELS" --shapes "$SHAPES" --bench-only 2>&1) \
  || die_usage "${plan#shapes.py: }"
BENCH_CASES=()
if [[ -n $plan ]]; then mapfile -t BENCH_CASES <<<"$plan"; fi
if [[ $KERNELS == all ]]; then
  KERNEL_LIST=(conv2d matmul attention)
else
  IFS=',' read -r -a KERNEL_LIST <<<"$KERNELS"
fi

export PATH="$PATH:/opt/aws/neuron/bin"   # Neuron tools; earlier PATH entries win

# ---------------------------------------------------------------- preflight
PREFLIGHT_FAILS=()   # "code|message"
PREFLIGHT_OK=()
PY=""
API=""              # nki01 | nki07: which kernels and tools, from sdk.py (see --help)
PROFILER=neuron-profile
CORE_LIST=()
SCRATCH="$(mktemp -d)"
# shellcheck disable=SC2317  # called from traps
cleanup_scratch() { rm -rf "$SCRATCH"; }
trap cleanup_scratch EXIT

fail() { PREFLIGHT_FAILS+=("$1|$2"); }
ok() { PREFLIGHT_OK+=("$1"); }

find_venv() {
  if [[ -n $VENV ]]; then
    [[ -x $VENV/bin/python ]] && return 0
    fail "$E_VENV" "--venv $VENV has no bin/python"; VENV=""; return 1
  fi
  if [[ -n ${VIRTUAL_ENV:-} && -x $VIRTUAL_ENV/bin/python ]] \
     && "$VIRTUAL_ENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("neuronxcc") or u.find_spec("nki")))' >/dev/null 2>&1; then
    VENV=$VIRTUAL_ENV; return 0
  fi
  local candidates c
  # SDK 2.26/2.27 DLAMIs ship _2_8/_2_9; later ones other pytorch venvs (e.g. the vLLM one).
  read -r -a candidates <<<"${NKI_HW_VENV_CANDIDATES:-/opt/aws_neuronx_venv_pytorch_2_8 /opt/aws_neuronx_venv_pytorch_2_9 $(compgen -G '/opt/aws_neuronx_venv_pytorch_*' | tr '\n' ' ')}"
  for c in "${candidates[@]}"; do
    if [[ -x $c/bin/python ]]; then VENV=$c; return 0; fi
  done
  fail "$E_VENV" "no Neuron venv: tried ${candidates[*]} (use --venv PATH or activate one)"
  return 1
}

preflight() {
  local product_file="${NKI_HW_PRODUCT_NAME_FILE:-/sys/devices/virtual/dmi/id/product_name}"
  local itype=""
  itype=$(tr -d '[:space:]' 2>/dev/null <"$product_file" || true)
  INSTANCE_TYPE=${itype:-unknown}
  if [[ $itype == trn2* ]]; then
    ok "instance type $itype"
  else
    fail "$E_INSTANCE" "instance type is '${itype:-unreadable}' (from $product_file); needs trn2.3xlarge or trn2.48xlarge"
  fi

  local helper=python3 ndev=0
  find_venv && { PY="$VENV/bin/python"; helper=$PY; ok "venv $VENV"; }

  if ! command -v neuron-ls >/dev/null 2>&1; then
    fail "$E_DEVICE" "neuron-ls not found on PATH or in /opt/aws/neuron/bin (install aws-neuronx-tools)"
  elif ! neuron-ls --json-output >"$SCRATCH/neuron-ls.json" 2>"$SCRATCH/neuron-ls.err"; then
    fail "$E_DEVICE" "neuron-ls --json-output failed: $(head -c 300 "$SCRATCH/neuron-ls.err")"
  elif ! ndev=$("$helper" "$ENV_PY" devices "$SCRATCH/neuron-ls.json" 2>"$SCRATCH/parse.err"); then
    fail "$E_DEVICE" "cannot parse neuron-ls output: $(head -c 300 "$SCRATCH/parse.err")"
  elif ((ndev == 0)); then
    fail "$E_DEVICE" "neuron-ls lists no Neuron device (is the aws-neuronx-dkms driver loaded?)"
  else
    ok "$ndev Neuron device(s)"
  fi

  # The SDK picks the path (nki01: NKI 0.1 kernels, neuron-profile; nki07: NKI 0.7 kernels,
  # neuron-explorer) or is refused; sdk.py prints "<path> <message>" (exit 0/1/3).
  if [[ -n $PY ]]; then
    local msg rc=0
    msg=$("$PY" "$SDK_PY" path 2>&1) || rc=$?
    case $rc in
      0) API=${msg%% *}; ok "${msg#* }" ;;
      1) fail "$E_SDK" "${msg#* }" ;;
      3) fail "$E_SDK_REFUSED" "${msg#* }" ;;
      *) fail "$E_SDK" "SDK check failed (exit $rc): $(head -c 300 <<<"$msg")" ;;
    esac
  else
    fail "$E_SDK" "SDK not checked: no venv"
  fi
  if [[ $API == nki07 ]]; then PROFILER=neuron-explorer; fi

  if command -v "$PROFILER" >/dev/null 2>&1; then
    ok "$PROFILER $(command -v "$PROFILER")"
  else
    fail "$E_PROFILER" "$PROFILER not found on PATH or in /opt/aws/neuron/bin (install aws-neuronx-tools)"
  fi

  if ((ndev > 0)); then
    local chosen
    if chosen=$("$helper" "$ENV_PY" choose-cores "$CORES" "$SCRATCH/neuron-ls.json" 2>"$SCRATCH/cores.err"); then
      read -r -a CORE_LIST <<<"$chosen"
      ok "NeuronCores ${CORE_LIST[*]}"
    else
      fail "$E_CORES" "--cores $CORES: $(cat "$SCRATCH/cores.err")"
    fi
  else
    fail "$E_CORES" "free NeuronCores not checked: no device"
  fi
}

report_preflight() {
  local line
  echo "preflight:"
  for line in "${PREFLIGHT_OK[@]}"; do echo "  ok      $line"; done
  for line in "${PREFLIGHT_FAILS[@]}"; do echo "  FAIL[${line%%|*}] ${line#*|}"; done
}

first_fail_code() {
  local code line
  for code in "$E_INSTANCE" "$E_DEVICE" "$E_PROFILER" "$E_VENV" "$E_SDK" "$E_SDK_REFUSED" "$E_CORES"; do
    for line in "${PREFLIGHT_FAILS[@]}"; do
      [[ ${line%%|*} == "$code" ]] && { echo "$code"; return; }
    done
  done
  echo 1
}

# ---------------------------------------------------------------- steps
RUN=""            # results folder of this run
STEP_PREFIX="m"   # step ids: m-NNN in the main process, wK-NNN in worker K
STEP_N=0
STEP_ID=""
CHILD=""          # pid of the running step: a `timeout` process, leader of its own process group
FAILED=0
MAIN_PID=$$

next_id() { STEP_N=$((STEP_N + 1)); printf -v STEP_ID '%s-%03d' "$STEP_PREFIX" "$STEP_N"; }

print_cmd() { local q; printf -v q '%q ' "$@"; echo "+ ${q% }"; }

# results_fault REASON: the results folder cannot be written (disk full, read-only). In a
# worker: leave the reason for the main process, signal it (USR1) and exit 17. In the main
# process: stop everything, finalise the manifest as failed with the reason if that can
# still be written, say in one line what happened, exit 17.
results_fault() {
  if [[ $STEP_PREFIX != m ]]; then
    printf '%s\n' "$1" >"$SCRATCH/fault.$BASHPID" 2>/dev/null || true
    kill -USR1 "$MAIN_PID" 2>/dev/null || true
    exit "$E_RESULTS"
  fi
  stop_all_and_finish failed "$E_RESULTS" "$1"
  exit "$E_RESULTS"
}

# manifest SUBCOMMAND ARGS...: hw_manifest.py; a failure to write is a results fault.
manifest() {
  local err rc=0
  err=$("$PY" "$MANIFEST_PY" "$@" 2>&1 >/dev/null) || rc=$?
  ((rc == 0)) && return 0
  err=${err%$'\n'}
  err=${err##*$'\n'}               # the last line: hw_manifest.py's one-line reason
  results_fault "${err:-hw_manifest.py $1 exited $rc}"
}

# stop_step PID: SIGTERM the step's whole process group (timeout and everything under it),
# SIGKILL what is left after STOP_GRACE seconds, and reap it.
stop_step() {
  local pid=$1 i
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < STOP_GRACE * 10; i++)); do
    kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$SCRATCH/pgid.$pid"
}

# run_step NAME PHASE KERNEL CASE CORE CWD STDOUT_FILE -- COMMAND...
# Records the step in the manifest, runs COMMAND under `timeout` in CWD (stdout to
# STDOUT_FILE when given, else to the log) and returns its exit code.
run_step() {
  local name=$1 phase=$2 kernel=$3 kcase=$4 core=$5 cwd=$6 out=$7
  shift 8
  if ((DRY_RUN)); then
    local q
    printf -v q '%q ' "$@"
    echo "+ cd $(printf '%q' "$cwd") && ${q% }${out:+ > $(printf '%q' "$out")}"
    return 0
  fi
  next_id
  local log="$RUN/logs/$STEP_ID-$name.log" rc=0
  manifest step-start --dir "$RUN" --id "$STEP_ID" --name "$name" --phase "$phase" \
    --log "${log#"$RUN"/}" --kernel "$kernel" --case "$kcase" --core "$core" -- "$@"
  { : >"$log"; } 2>/dev/null || results_fault "cannot create the step log $log"
  if [[ -n $out ]]; then
    { : >"$out"; } 2>/dev/null || results_fault "cannot create $out"
    (cd "$cwd" && exec timeout -k 30 "$TIMEOUT" "$@" >"$out" 2>"$log" </dev/null) &
  else
    (cd "$cwd" && exec timeout -k 30 "$TIMEOUT" "$@" >"$log" 2>&1 </dev/null) &
  fi
  CHILD=$!
  : >"$SCRATCH/pgid.$CHILD" 2>/dev/null || true   # for the main process's last sweep
  wait "$CHILD" || rc=$?
  rm -f "$SCRATCH/pgid.$CHILD"
  CHILD=""
  manifest step-end --dir "$RUN" --id "$STEP_ID" --rc "$rc"
  if ((rc != 0)); then
    FAILED=$((FAILED + 1))
    echo "[$PROG] step $name failed (exit $rc), log: $log" >&2
  fi
  return "$rc"
}

tests_job() {  # tests_job KERNEL CORE
  local kernel=$1 core=$2
  if [[ $API == nki07 ]]; then  # NumPy call + torch-neuronx + nki.simulate cross-check
    run_step "hw_tests-$kernel" hw_tests "$kernel" "" "$core" "$RUN/hw_tests" "" -- \
      env NEURON_RT_VISIBLE_CORES="$core" "${NKI07_ENV[@]}" PYTHONPATH="$PYPATH" \
      "$PY" -m nki_kernels.hw.nki07_path check --kernel "$kernel" --shapes "$SHAPES" \
      --out "$RUN/hw_tests" --timeout "$TIMEOUT" || true
    return 0
  fi
  run_step "hw_tests-$kernel" hw_tests "$kernel" "" "$core" "$ROOT" "" -- \
    env NEURON_RT_VISIBLE_CORES="$core" NKI_BACKEND=neuron NKI_HW_REQUIRE=1 \
    NKI_HW_KERNELS="$kernel" NKI_HW_SHAPES="$SHAPES" NKI_HW_RESULTS="$RUN/hw_tests" \
    PYTHONPATH="$PYPATH" "$PY" -m pytest "$ROOT/hw_tests" -m hardware -rs \
    --ignore="$ROOT/hw_tests/test_device_benchmark.py" --ignore="$CONSTRUCTS_TEST" -p no:cacheprovider \
    --junitxml="$RUN/hw_tests/$kernel.junit.xml" || true
}

case_job() {  # case_job KERNEL CASE CORE
  local kernel=$1 kcase=$2 core=$3
  local dir="$RUN/$kernel/$kcase" stem="${kernel}_${kcase}"
  # The two paths differ in the step module and the capture flags; the rest is shared.
  # NKI 0.7: bench compiles with NEURON_FRAMEWORK_DEBUG=1 (keeps the NEFF) and times
  # profiled executions; the capture skips the first execution (--profile-nth-exec=2 writes
  # <stem>_exec_2.ntff, renamed below).
  local step_mod=nki_kernels.hw.job bench_env=(NKI_BACKEND=neuron) capture_args=()
  if [[ $API == nki07 ]]; then
    step_mod=nki_kernels.hw.nki07_path capture_args=(--profile-nth-exec=2)
    bench_env=("${NKI07_ENV[@]}" NEURON_FRAMEWORK_DEBUG=1)   # keep the NEFF (NKI profiling guide)
  fi
  if ((!DRY_RUN)); then
    mkdir -p "$dir" 2>/dev/null || results_fault "cannot create $dir"
  fi
  if ((!NO_ESTIMATE)); then
    # The interpreter runs the kernel (yours too, via NKI_HW_KERNEL_<NAME>) with neuronxcc.nki
    # (NKI 0.1) or nki (NKI 0.7) aliased to it, in this step's own process.
    run_step "estimate-$stem" estimate "$kernel" "$kcase" "" "$ROOT" "" -- \
      env NKI_BACKEND=sim PYTHONPATH="$PYPATH" "$PY" -m "$step_mod" estimate \
      --kernel "$kernel" --case "$kcase" --out "$dir" || true
  fi
  run_step "bench-$stem" bench "$kernel" "$kcase" "$core" "$dir" "" -- \
    env NEURON_RT_VISIBLE_CORES="$core" "${bench_env[@]}" PYTHONPATH="$PYPATH" \
    "$PY" -m "$step_mod" bench --kernel "$kernel" --case "$kcase" --out "$dir" \
    --warmup "$WARMUP" --iters "$ITERS" || return 0
  if ((!DRY_RUN)) && [[ ! -f $dir/$stem.neff ]]; then
    echo "[$PROG] no NEFF for $stem; profile skipped" >&2
    return 0
  fi
  run_step "capture-$stem" profile "$kernel" "$kcase" "$core" "$dir" "" -- \
    env NEURON_RT_VISIBLE_CORES="$core" "$PROFILER" capture -n "$stem.neff" -s "$stem.ntff" \
    "${capture_args[@]}" || return 0
  if ((!DRY_RUN)) && [[ ! -f $dir/$stem.ntff && -f $dir/${stem}_exec_2.ntff ]]; then
    mv "$dir/${stem}_exec_2.ntff" "$dir/$stem.ntff"
  fi
  run_step "summary-json-$stem" profile "$kernel" "$kcase" "" "$dir" "$dir/$stem.summary.json" -- \
    "$PROFILER" view -n "$stem.neff" -s "$stem.ntff" --output-format summary-json || true
  run_step "summary-text-$stem" profile "$kernel" "$kcase" "" "$dir" "$dir/$stem.summary.txt" -- \
    "$PROFILER" view -n "$stem.neff" -s "$stem.ntff" --output-format summary-text || true
  if run_step "perfetto-$stem" profile "$kernel" "$kcase" "" "$dir" "" -- \
    "$PROFILER" view -n "$stem.neff" -s "$stem.ntff" --output-format perfetto \
    --output-file "$stem.pftrace" && ((!DRY_RUN)) && [[ ! -f $dir/$stem.pftrace ]]; then
    local other   # tool versions that ignore --output-file write one of these names
    for other in "$dir/ntff.pftrace" "$dir"/device_profile_model_*.pftrace; do
      if [[ -f $other ]]; then mv "$other" "$dir/$stem.pftrace"; break; fi
    done
  fi
  if ((!NO_ESTIMATE)) && { ((DRY_RUN)) || [[ -s $dir/$stem.summary.json && -f $dir/$stem.estimate.json ]]; }; then
    run_step "compare-$stem" compare "$kernel" "$kcase" "" "$dir" "" -- \
      env PYTHONPATH="$PYPATH" "$PY" -m nki_kernels.hw.compare "$stem.summary.json" \
      "$stem.estimate.json" --json compare.json || true
  fi
}

# constructs_step CORE: the construct smoke test of the path in use, as one step (JUnit
# report in hw_tests/constructs.junit.xml).  Returns the step's exit code.
constructs_step() {
  local core=$1 junit="$RUN/hw_tests/constructs.junit.xml"
  if [[ $API == nki07 ]]; then
    run_step constructs constructs "" "" "$core" "$RUN/hw_tests" "" -- \
      env NEURON_RT_VISIBLE_CORES="$core" "${NKI07_ENV[@]}" PYTHONPATH="$PYPATH" \
      "$PY" -m nki_kernels.hw.nki07_path smoke --out "$RUN/hw_tests/smoke_nki07.json" --junitxml "$junit"
  else
    run_step constructs constructs "" "" "$core" "$ROOT" "" -- \
      env NEURON_RT_VISIBLE_CORES="$core" NKI_BACKEND=neuron NKI_HW_REQUIRE=1 PYTHONPATH="$PYPATH" \
      "$PY" -m pytest "$CONSTRUCTS_TEST" -rs -p no:cacheprovider --junitxml="$junit"
  fi
}

# The NKI 0.1 smoke test is a pytest file that may be absent; the 0.7 one is a module here.
have_constructs_test() { [[ $API == nki07 || -f $CONSTRUCTS_TEST ]]; }

# run_job INDEX "tests|KERNEL" or "case|KERNEL|CASE" CORE: one job, then its progress line.
run_job() {
  local index=$1 kind kernel kcase start failed_before=$FAILED took
  IFS='|' read -r kind kernel kcase <<<"$2"
  start=$SECONDS
  if [[ $kind == tests ]]; then tests_job "$kernel" "$3"; else case_job "$kernel" "$kcase" "$3"; fi
  ((DRY_RUN)) && return 0
  took=$((SECONDS - start))
  printf -v took '%d:%02d' $((took / 60)) $((took % 60))
  local what="$kernel $kcase" verdict=ok
  [[ $kind == tests ]] && what="hw_tests $kernel"
  if ((FAILED > failed_before)); then verdict="FAILED ($((FAILED - failed_before)) step(s), see above)"; fi
  echo "[$index/${#JOBS[@]}] $what ... $verdict $took"
}

worker() {  # worker INDEX CORE JOB... (each JOB is "N|kind|kernel|case")
  STEP_PREFIX="w$1" STEP_N=0 FAILED=0
  local core=$2 job
  shift 2
  trap 'worker_stop' INT TERM
  for job in "$@"; do run_job "${job%%|*}" "${job#*|}" "$core"; done
  ((FAILED == 0))
}

# shellcheck disable=SC2317  # trap handler
worker_stop() {
  trap '' INT TERM
  local pid
  if [[ -n $CHILD ]]; then stop_step "$CHILD"; fi
  for pid in $(jobs -p); do stop_step "$pid"; done   # a step started just before the signal
  exit 143
}

# ---------------------------------------------------------------- main
preflight
# Every NKI 0.7 device step runs at LNC=1, as the kernels are launched (the two must match,
# nki.jit docstring); its compiler artifacts land in the step's working directory.
NKI07_ENV=(NEURON_LOGICAL_NC_CONFIG=1)

JOBS=()
if ((!SKIP_TESTS)); then
  for k in "${KERNEL_LIST[@]}"; do JOBS+=("tests|$k"); done
fi
for line in "${BENCH_CASES[@]}"; do JOBS+=("case|${line% *}|${line#* }"); done

SHA=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nogit)
DIRTY=0
if [[ $SHA != nogit && -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]]; then DIRTY=1; fi
RUN_ID="$(date -u +%Y%m%dT%H%M%SZ)-$SHA"

if ((DRY_RUN)); then
  echo "$PROG --dry-run: nothing is executed (only the read-only preflight probes ran)."
  report_preflight
  if ((${#PREFLIGHT_FAILS[@]})); then
    echo "(a real run would stop here with exit code $(first_fail_code))"
  fi
  if ((${#CORE_LIST[@]} == 0)); then
    if [[ $CORES =~ ^[0-9]+$ ]]; then mapfile -t CORE_LIST < <(seq 0 $((CORES - 1))); else CORE_LIST=("<$CORES>"); fi
  fi
  PY=${PY:-"${VENV:-/opt/aws_neuronx_venv_pytorch_2_8}/bin/python"}
  RUN="$RESULTS_ROOT/$RUN_ID"
  if [[ -z $API ]]; then
    API=nki01
    echo "(no usable SDK detected: showing the NKI 0.1 plan; an SDK >= 2.33 venv shows the NKI 0.7 one)"
  fi
  echo "plan: ${#JOBS[@]} jobs on NeuronCore(s) ${CORE_LIST[*]}, shapes '$SHAPES', kernels '$KERNELS', path $API"
  print_cmd mkdir -p "$RESULTS_ROOT"
  print_cmd mkdir "$RUN" "$RUN/logs" "$RUN/hw_tests" "$RUN/env"
  if ((!SKIP_INSTALL)); then
    print_cmd "$PY" -m pip install --disable-pip-version-check -e "${ROOT}[test]"
  fi
  if ((SKIP_TESTS)); then
    echo "# construct smoke test skipped (--skip-tests)"
  elif have_constructs_test; then
    echo "# construct smoke test first; the run stops if it fails"
    constructs_step "${CORE_LIST[0]}"
  else
    echo "# construct smoke test skipped: $CONSTRUCTS_TEST not found"
  fi
  i=0
  for job in "${JOBS[@]}"; do
    echo "# job $((i + 1))/${#JOBS[@]} on core ${CORE_LIST[i % ${#CORE_LIST[@]}]}: ${job//|/ }"
    run_job "$((i + 1))" "$job" "${CORE_LIST[i % ${#CORE_LIST[@]}]}"
    i=$((i + 1))
  done
  exit 0
fi

if ((${#PREFLIGHT_FAILS[@]})); then
  report_preflight >&2
  code=$(first_fail_code)
  echo "$PROG: preflight failed (exit $code); nothing was run. See '$PROG --help'." >&2
  exit "$code"
fi
report_preflight

mkdir -p "$RESULTS_ROOT" 2>/dev/null || { echo "$PROG: cannot create $RESULTS_ROOT" >&2; exit "$E_RESULTS"; }
RUN="$RESULTS_ROOT/$RUN_ID"
n=1
until mkdir "$RUN" 2>/dev/null; do    # mkdir without -p never reuses a folder
  n=$((n + 1))
  ((n < 100)) || { echo "$PROG: cannot create a new folder under $RESULTS_ROOT" >&2; exit "$E_RESULTS"; }
  RUN="$RESULTS_ROOT/$RUN_ID-$n"
done
# Before the manifest exists, a folder that cannot be written is reported and left as is.
setup_fail() {
  echo "$PROG: cannot write the new results folder $RUN: $1; nothing was run (the folder is incomplete)" >&2
  exit "$E_RESULTS"
}
{ mkdir "$RUN/logs" "$RUN/hw_tests" "$RUN/env" && cp "$SCRATCH/neuron-ls.json" "$RUN/env/neuron-ls.json"; } \
  2>"$SCRATCH/setup.err" || setup_fail "$(tail -n 1 "$SCRATCH/setup.err")"
{ "$PY" "$ENV_PY" sdk >"$RUN/env/sdk.json" 2>"$RUN/logs/sdk-info.log" || echo '{}' >"$RUN/env/sdk.json"; } \
  2>/dev/null || setup_fail "cannot write $RUN/env/sdk.json"
{ "$PY" "$SDK_PY" info >"$RUN/env/sdk_path.json" 2>>"$RUN/logs/sdk-info.log" || echo '{}' >"$RUN/env/sdk_path.json"; } \
  2>/dev/null || setup_fail "cannot write $RUN/env/sdk_path.json"
TOOLS_VERSION=$(dpkg-query -W -f='${Version}' aws-neuronx-tools 2>/dev/null \
  || rpm -q --qf '%{VERSION}' aws-neuronx-tools 2>/dev/null || echo unknown)

FINISHED=0
FINISH_ERROR=""
WORKER_PIDS=()
# finish STATUS EXIT_CODE [REASON]: finalise manifest.json and SUMMARY.md; 1 if that fails.
finish() {
  FINISHED=1
  local err rc=0 extra=()
  [[ -n ${3:-} ]] && extra=(--reason "$3")
  err=$("$PY" "$MANIFEST_PY" finish --dir "$RUN" --status "$1" --exit-code "$2" "${extra[@]}" 2>&1 >/dev/null) \
    || rc=$?
  ((rc == 0)) && return 0
  FINISH_ERROR=${err:-hw_manifest.py finish exited $rc}
  return 1
}
report_finish() {  # report_finish STATUS: the last line of a run
  if [[ -z $FINISH_ERROR ]]; then
    echo "[$PROG] $1: results in $RUN (manifest.json, SUMMARY.md)"
  else
    echo "$PROG: $1, but manifest.json could not be finalised ($FINISH_ERROR); treat $RUN as incomplete" >&2
  fi
}
# stop_all STATUS: stop every worker and step (whole process groups), wait for all of them.
stop_all() {
  trap '' INT TERM USR1
  local pid f
  for pid in "${WORKER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if [[ -n $CHILD ]]; then stop_step "$CHILD"; fi
  for pid in "${WORKER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for f in "$SCRATCH"/pgid.*; do   # steps whose worker died before stopping them
    [[ -e $f ]] && stop_step "${f##*.}"
  done
  return 0
}
# stop_all_and_finish STATUS EXIT_CODE REASON (a results fault; see results_fault)
stop_all_and_finish() {
  stop_all
  if finish "$1" "$2" "$3"; then
    echo "$PROG: cannot write results: $3; stopped every step; manifest.json marked failed (SUMMARY.md says why)" >&2
  else
    echo "$PROG: cannot write results: $3; stopped every step; manifest.json could not be finalised either; treat $RUN as incomplete" >&2
  fi
}
# shellcheck disable=SC2317  # trap handler
on_signal() {  # on_signal EXIT_CODE
  echo "[$PROG] interrupted; stopping running steps, keeping finished results" >&2
  stop_all
  { date -u +%Y-%m-%dT%H:%M:%SZ >"$RUN/INTERRUPTED"; } 2>/dev/null || true
  finish interrupted "$1" || true
  report_finish interrupted
  exit "$1"
}
# shellcheck disable=SC2317  # trap handler: a worker could not write the results folder
on_fault() {
  local f reason="a worker could not write the results folder"
  for f in "$SCRATCH"/fault.*; do [[ -s $f ]] && { reason=$(head -n 1 "$f"); break; }; done
  stop_all_and_finish failed "$E_RESULTS" "$reason"
  exit "$E_RESULTS"
}
# shellcheck disable=SC2317  # trap handler
on_exit() {
  local rc=$?
  if ((!FINISHED)); then
    stop_all
    finish failed "$rc" "run_hw.sh stopped unexpectedly (exit $rc)" || true
    report_finish failed
  fi
  cleanup_scratch
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap on_fault USR1
trap on_exit EXIT

manifest init --dir "$RUN" --run-id "$(basename "$RUN")" --git-sha "$SHA" --git-dirty "$DIRTY" \
  --option "kernels=$KERNELS" --option "shapes=$SHAPES" --option "cores=$CORES" \
  --option "timeout=$TIMEOUT" --option "warmup=$WARMUP" --option "iters=$ITERS" \
  --option "skip_install=$SKIP_INSTALL" --option "skip_tests=$SKIP_TESTS" \
  --option "no_estimate=$NO_ESTIMATE" \
  --env "instance_type=$INSTANCE_TYPE" --env "venv=$VENV" --env "cores=${CORE_LIST[*]}" \
  --env "aws_neuronx_tools=$TOOLS_VERSION" --env "nki_path=$API" --env "profiler=$PROFILER" \
  --env-json "sdk=$RUN/env/sdk.json" --env-json "sdk_path=$RUN/env/sdk_path.json" \
  --env-json "neuron_ls=$RUN/env/neuron-ls.json" \
  -- "$0" "${ORIG_ARGS[@]}"
echo "[$PROG] results folder: $RUN"

if ((!SKIP_INSTALL)); then
  if ! run_step install install "" "" "" "$ROOT" "" -- \
    "$PY" -m pip install --disable-pip-version-check -e "${ROOT}[test]"; then
    echo "$PROG: installing the project into $VENV failed (log: $RUN/logs/$STEP_ID-install.log); if the venv" \
      "is not writable, rerun with --skip-install" >&2
    finish failed "$E_INSTALL" "installing the project into $VENV failed" || true
    report_finish failed
    exit "$E_INSTALL"
  fi
fi

# The construct smoke test: every NKI construct the kernels rely on, compiled and run once on
# the device; a failure stops the run before any benchmark, naming the construct.
if ((SKIP_TESTS)); then
  echo "[$PROG] construct smoke test skipped (--skip-tests)"
elif ! have_constructs_test; then
  echo "[$PROG] construct smoke test skipped: $CONSTRUCTS_TEST not found"
else
  junit="$RUN/hw_tests/constructs.junit.xml"
  if ! constructs_step "${CORE_LIST[0]}"; then
    failures=$("$PY" "$MANIFEST_PY" junit-failures "$junit" 2>/dev/null || true)
    if [[ -z $failures ]]; then   # pytest stopped before any test (no device, collection error)
      failures="(no test ran) $(grep -v '^[[:space:]]*$' "$RUN/logs/$STEP_ID-constructs.log" 2>/dev/null | tail -n 1)"
    fi
    {
      echo "$PROG: construct smoke test failed; nothing was benchmarked. Failed construct(s):"
      while IFS= read -r line; do echo "  $line"; done <<<"$failures"
      echo "  log: $RUN/logs/$STEP_ID-constructs.log"
    } >&2
    finish failed "$E_CONSTRUCTS" "construct smoke test failed: ${failures%%$'\n'*}" || true
    report_finish failed
    exit "$E_CONSTRUCTS"
  fi
  echo "[$PROG] construct smoke test passed"
fi

# Spread the jobs round-robin over the chosen cores: one worker (one job at a time) per core.
declare -a WORKER_JOBS
for i in "${!CORE_LIST[@]}"; do WORKER_JOBS[i]=""; done
i=0
for job in "${JOBS[@]}"; do
  w=$((i % ${#CORE_LIST[@]}))
  WORKER_JOBS[w]+="$((i + 1))|$job"$'\n'
  i=$((i + 1))
done
echo "[$PROG] ${#JOBS[@]} jobs on NeuronCore(s) ${CORE_LIST[*]}"
for w in "${!CORE_LIST[@]}"; do
  mapfile -t mine < <(printf '%s' "${WORKER_JOBS[w]}")
  ((${#mine[@]})) || continue
  worker "$w" "${CORE_LIST[w]}" "${mine[@]}" &
  WORKER_PIDS+=("$!")
done
for pid in "${WORKER_PIDS[@]}"; do
  rc=0
  wait "$pid" || rc=$?
  if ((rc == E_RESULTS)); then on_fault; fi
  ((rc == 0)) || FAILED=$((FAILED + 1))
done

if ((FAILED)); then
  finish completed_with_failures "$E_STEPS" || true
  report_finish completed_with_failures
  exit "$E_STEPS"
fi
finish completed 0 || true
report_finish completed
exit 0
