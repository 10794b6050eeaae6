#!/usr/bin/env bash
# The nightly run: every benchmark case on a 4-rank world, gated by the paired A/B comparison
# (--dmlbench-against REF): REF's code is re-measured beside this checkout in the same run, so the gate
# needs no stored baselines and works on a hosted runner whose CPU model changes from night to night.
# A regression fails its test item, so pytest exits non-zero and JUnit XML names the case.
# The plugin appends the markdown summary to $GITHUB_STEP_SUMMARY when that is set.
# The plots and a self-contained report.html go to REPORT_DIR, beside the environment report (env.json).
# Usage: bash ci/nightly.sh [RESULTS_JSON] [JUNIT_XML] [REPORT_DIR]
# Environment:
#   DMLBENCH_AGAINST    REF to compare with; when empty: the last green nightly's commit
#                       (DMLBENCH_LAST_GREEN, looked up by the workflow), else the stored baselines' commit
#                       (`baseline`) when they record one, else the parent commit (HEAD~1).
#   DMLBENCH_THRESHOLD  percent, default 10; DMLBENCH_FAIL_ON_IMPROVEMENT: 1 to fail on improvements.
#   DMLBENCH_FAIL_ON_INCONCLUSIVE  1 fails a case with a figure no test could judge; 0 (default, until every
#                       shipped case is testable at world size 4 within its pair budget: ci/README.md) lists
#                       such figures in the summary without failing.
# Accepting an intended slowdown: a commit after REF whose message has a line "Dmlbench-Accept: <why>" moves
# REF to that commit, so the night judges only what came after the accepted change.
set -euo pipefail
results="${1:-results.json}"
junit="${2:-junit.xml}"
report="${3:-dmlbench-report}"
extra=()
if [[ "${DMLBENCH_FAIL_ON_IMPROVEMENT:-0}" == "1" ]]; then
  extra+=(--dmlbench-fail-on-improvement)
fi
if [[ "${DMLBENCH_FAIL_ON_INCONCLUSIVE:-0}" == "1" ]]; then
  extra+=(--dmlbench-fail-on-inconclusive)
fi
against="$(bash "$(dirname "$0")/nightly_ref.sh")"
echo "dmlbench: gating against $against"
set -x
mkdir -p "$report"
python -m pytest_dmlbench env --json > "$report/env.json"
pytest --dmlbench --world-size 4 bench_cases --dmlbench-against "$against" --dmlbench-json "$results" \
  --dmlbench-plots "$report" \
  --dmlbench-threshold "${DMLBENCH_THRESHOLD:-10}" --junitxml "$junit" -p no:cacheprovider "${extra[@]}"
