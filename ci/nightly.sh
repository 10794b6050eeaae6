#!/usr/bin/env bash
# The nightly run: every benchmark case on a 4-rank world, compared with baselines/<machine-key>/.
# A regression fails its test item, so pytest exits non-zero and JUnit XML names the case.
# The plugin appends the markdown summary to $GITHUB_STEP_SUMMARY when that is set.
# The plots and a self-contained report.html go to REPORT_DIR, beside the environment report (env.json).
# Usage: bash ci/nightly.sh [RESULTS_JSON] [JUNIT_XML] [REPORT_DIR]
# Environment: DMLBENCH_THRESHOLD (percent, default 10), DMLBENCH_FAIL_ON_IMPROVEMENT (1 to fail on them).
set -euo pipefail
results="${1:-results.json}"
junit="${2:-junit.xml}"
report="${3:-dmlbench-report}"
extra=()
if [[ "${DMLBENCH_FAIL_ON_IMPROVEMENT:-0}" == "1" ]]; then
  extra+=(--dmlbench-fail-on-improvement)
fi
set -x
mkdir -p "$report"
python -m pytest_dmlbench env --json > "$report/env.json"
pytest --dmlbench --world-size 4 bench_cases --dmlbench-json "$results" --dmlbench-plots "$report" \
  --dmlbench-threshold "${DMLBENCH_THRESHOLD:-10}" --junitxml "$junit" -p no:cacheprovider "${extra[@]}"
