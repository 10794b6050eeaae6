#!/usr/bin/env bash
# Records the baselines of this machine class: runs the cases SAVES times in a row with --dmlbench-save
# (no comparison). Each save writes baselines/<machine-key>/<identity>/ (e.g. ws4-gloo-fork-persistent:
# world size, backend, launcher, isolation) atomically, one file per case, and carries
# the run history forward, so the baseline also knows how much whole runs differ on this machine; with
# three or more saves a regression must lie outside that run-to-run spread. Each file records the commit
# it was measured at (run.commit), which `--dmlbench-against baseline` re-measures.
# Usage: bash ci/refresh_baselines.sh [RESULTS_JSON]
# Environment: DMLBENCH_CASES (pytest arguments selecting the cases, default "bench_cases"),
#              DMLBENCH_SAVES (how many runs to save, default 5; at least 3 to measure run-to-run noise).
set -euo pipefail
results="${1:-results.json}"
saves="${DMLBENCH_SAVES:-5}"
read -r -a cases <<< "${DMLBENCH_CASES:-bench_cases}"
if ! [[ "$saves" =~ ^[1-9][0-9]*$ ]]; then
  echo "DMLBENCH_SAVES must be a positive whole number, got '$saves'" >&2
  exit 2
fi
for ((save = 1; save <= saves; save++)); do
  echo "::group::save $save of $saves"
  set -x
  pytest --dmlbench --world-size 4 "${cases[@]}" --dmlbench-save --dmlbench-no-compare \
    --dmlbench-json "$results" -p no:cacheprovider
  { set +x; } 2>/dev/null
  echo "::endgroup::"
done
