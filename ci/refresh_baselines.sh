#!/usr/bin/env bash
# Records the baselines of this machine class: runs the cases with --dmlbench-save (no comparison), which
# writes baselines/<machine-key>/ atomically, one file per case.
# Usage: bash ci/refresh_baselines.sh [RESULTS_JSON]
# Environment: DMLBENCH_CASES (pytest arguments selecting the cases, default "bench_cases").
set -euo pipefail
results="${1:-results.json}"
read -r -a cases <<< "${DMLBENCH_CASES:-bench_cases}"
set -x
pytest --dmlbench --world-size 4 "${cases[@]}" --dmlbench-save --dmlbench-no-compare \
  --dmlbench-json "$results" -p no:cacheprovider
