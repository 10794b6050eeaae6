#!/usr/bin/env bash
# The nightly run: every benchmark case on a 4-rank world, compared with baselines/<machine-key>/.
# A regression fails its test item, so pytest exits non-zero and JUnit XML names the case.
# The plugin appends the markdown summary to $GITHUB_STEP_SUMMARY when that is set.
# Usage: bash ci/nightly.sh [RESULTS_JSON] [JUNIT_XML]
# Environment: DMLBENCH_THRESHOLD (percent, default 10), DMLBENCH_FAIL_ON_IMPROVEMENT (1 to fail on them).
set -euo pipefail
results="${1:-results.json}"
junit="${2:-junit.xml}"
extra=()
if [[ "${DMLBENCH_FAIL_ON_IMPROVEMENT:-0}" == "1" ]]; then
  extra+=(--dmlbench-fail-on-improvement)
fi
set -x
pytest --dmlbench --world-size 4 bench_cases --dmlbench-json "$results" \
  --dmlbench-threshold "${DMLBENCH_THRESHOLD:-10}" --junitxml "$junit" -p no:cacheprovider "${extra[@]}"
