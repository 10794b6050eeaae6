#!/usr/bin/env bash
# The nightly run: every benchmark case on a 4-rank world, gated by the paired A/B comparison
# (--dmlbench-against REF): REF's code is re-measured beside this checkout in the same run, so the gate
# needs no stored baselines and works on a hosted runner whose CPU model changes from night to night.
# A regression fails its test item, so pytest exits non-zero and JUnit XML names the case.
# The plugin appends the markdown summary to $GITHUB_STEP_SUMMARY when that is set.
# The plots and a self-contained report.html go to REPORT_DIR, beside the environment report (env.json).
# After the run the night's figures are added to the nightly history (DMLBENCH_HISTORY) and the step
# detector's findings over it (steps and creep across nights) are printed, appended to $GITHUB_STEP_SUMMARY
# and added to REPORT_DIR/report.html; they inform and never change the exit status, which is pytest's.
# Usage: bash ci/nightly.sh [RESULTS_JSON] [JUNIT_XML] [REPORT_DIR]
# Environment:
#   DMLBENCH_AGAINST    REF to compare with; when empty: the last green nightly's commit
#                       (DMLBENCH_LAST_GREEN, looked up by the workflow), else the stored baselines' commit
#                       (`baseline`) when they record one, else the parent commit (HEAD~1).
#   DMLBENCH_ANCHOR_NIGHT, DMLBENCH_ANCHOR  1: gate against the fixed anchor (DMLBENCH_ANCHOR, else the newest
#                       release tag v*) instead of the last green night (nightly_ref.sh; weekly in the workflow).
#   DMLBENCH_HISTORY    the nightly history folder (default dmlbench-history; the workflow keeps it in its cache).
#   DMLBENCH_CPU_THRESHOLD  percent, default 10, or off: CPU time per step (cpu_time_s) is judged at this threshold
#                       of its own (--dmlbench-cpu-threshold). 10 keeps to CPU time's measured per-pair noise on these
#                       cases (median 9.0-11.9 % by world size, the A/A night of 2026-11-29) the ratio the 10 % wall
#                       threshold keeps to wall time's 8-12 %. The 2.5 it replaced came from a compute-bound study
#                       (2.4 %) and was far tighter than the shipped cases' noise: that night none of 43 CPU figures
#                       settled at it. Replayed from that night (`python -m studies.replay_nights R.json --futility on
#                       --cpu-threshold X`): 1 of 100 nights red for nothing at 10, 5-7 at 2.5 and 5, and 2.5 spent
#                       the most pairs; 2.5 caught more 5 % slowdowns at world size 2 (docs/evidence/run-logs.md,
#                       "The nightly's CPU threshold from measured noise"). CPU time misses waiting (a slower peer, a
#                       barrier, a sleep, I/O): wall time, at DMLBENCH_THRESHOLD, still judges that.
#   DMLBENCH_CASE_THRESHOLDS  a per-case thresholds file (--dmlbench-case-thresholds; default: none, every case at
#                       the run's thresholds): each case it lists is judged at the tightest threshold its own recorded
#                       noise settles, as `python -m studies.case_thresholds` writes it from A/A nights; a marker's
#                       threshold= still wins (docs/explanation/statistics.md, "Per-case thresholds"). The one
#                       measured from the recorded nights ships as ci/case_thresholds.json: replayed, 72 % of figures
#                       settled a night against 58 % at the defaults, none red; in-sample, so not yet the default.
#   DMLBENCH_THRESHOLD  percent, default 10. 5 catches 10 % slowdowns far more often, but an A/A night at 5 % was
#                       red on a 12 % offset one night's two worlds had for one case (docs/evidence/run-logs.md, night 11);
#                       DMLBENCH_FAIL_ON_IMPROVEMENT: 1 to fail on improvements.
#   DMLBENCH_FUTILITY   on (default): a case's first stage ends once no unclear figure could settle by the cap
#                       (--dmlbench-futility); off: pairs to the cap or budget. Since a figure is unchanged only when
#                       proven, the stop leaves what it ends unsettled: replayed, it saved 7.8 min of a night's pairs
#                       and left 80 figures unsettled against 39, catching a 10 % slowdown about half as often; but a
#                       live night without it took over 60 minutes (docs/evidence/run-logs.md, 2026-11-28), so it stays on.
#   DMLBENCH_RANK_ALLOCATOR  tcmalloc (default): both block servers' ranks preload tcmalloc
#                       (--dmlbench-rank-allocator), so a large tensor's memory is reused alike in every world;
#                       with glibc's own a 16 MB all-gather's speed was drawn per world (docs/evidence/run-logs.md, night 11).
#                       system: the C library's allocator.
#   DMLBENCH_BLOCK_MIN_ROUNDS, DMLBENCH_BLOCK_WARMUP  default 2 and 1 (the plugin's own: 5 and 2): a block times at
#                       least this many rounds after this many untimed ones (--dmlbench-block-min-rounds,
#                       --dmlbench-block-warmup). A step of seconds (the ResNet and loader cases) made a block of 7
#                       steps, and their first stage's 4 pairs overran the 60 s pair budget up to nine times; side by
#                       side in one run, 2 after 1 cut their pairs by 40-50 % and a session of the 13 slowest cases by
#                       18 % (docs/evidence/run-logs.md, "Fewer rounds for slow steps"). A step under 0.04 s keeps
#                       its 0.2 s of rounds.
#   DMLBENCH_DRIFT_THRESHOLD  percent, default 10: the step detector's threshold over the history.
#   DMLBENCH_FAIL_ON_INCONCLUSIVE  untestable (default): a case with a figure no test could judge fails;
#                       all (or 1): a figure a test ran on and could not settle fails too (about 39 a night on the
#                       2-core runner, replayed at 10 %, and every memory peak on kept worlds, so every night would be
#                       red); none (or 0): inconclusive figures are listed and counted in the summary, failing nothing.
#                       Either way the summary counts the settled and the unsettled figures, per figure kind.
# Accepting an intended slowdown: a commit after REF whose message has a line "Dmlbench-Accept: <why>" moves
# REF to that commit, so the night judges only what came after the accepted change.
set -euo pipefail
results="${1:-results.json}"
junit="${2:-junit.xml}"
report="${3:-dmlbench-report}"
cpu_threshold="${DMLBENCH_CPU_THRESHOLD:-10}"
extra=()
if [[ "${DMLBENCH_FAIL_ON_IMPROVEMENT:-0}" == "1" ]]; then
  extra+=(--dmlbench-fail-on-improvement)
fi
if [[ -n "${DMLBENCH_CASE_THRESHOLDS:-}" ]]; then
  extra+=(--dmlbench-case-thresholds "$DMLBENCH_CASE_THRESHOLDS")
fi
case "${DMLBENCH_FAIL_ON_INCONCLUSIVE:-untestable}" in
  untestable) extra+=(--dmlbench-fail-on-untestable) ;;
  all | 1) extra+=(--dmlbench-fail-on-inconclusive) ;;
  none | 0) ;;
  *)
    echo >&2 "dmlbench: DMLBENCH_FAIL_ON_INCONCLUSIVE=${DMLBENCH_FAIL_ON_INCONCLUSIVE} is not one of untestable, all (1), none (0)"
    exit 2
    ;;
esac
against="$(bash "$(dirname "$0")/nightly_ref.sh")"
echo "dmlbench: gating against $against"
set -x
mkdir -p "$report"
python -m pytest_dmlbench env --json > "$report/env.json"
status=0
pytest --dmlbench --world-size 4 bench_cases --dmlbench-against "$against" --dmlbench-json "$results" \
  --dmlbench-plots "$report" \
  --dmlbench-threshold "${DMLBENCH_THRESHOLD:-10}" --dmlbench-futility "${DMLBENCH_FUTILITY:-on}" \
  --dmlbench-rank-allocator "${DMLBENCH_RANK_ALLOCATOR:-tcmalloc}" --dmlbench-cpu-threshold "$cpu_threshold" \
  --dmlbench-block-min-rounds "${DMLBENCH_BLOCK_MIN_ROUNDS:-2}" --dmlbench-block-warmup "${DMLBENCH_BLOCK_WARMUP:-1}" \
  --junitxml "$junit" -p no:cacheprovider "${extra[@]}" || status=$?
set +x
history="${DMLBENCH_HISTORY:-dmlbench-history}"
if [[ -f "$results" ]]; then
  record=(--history "$history" --ref "$against")
  if [[ "${DMLBENCH_ANCHOR_NIGHT:-0}" == "1" && -z "${DMLBENCH_AGAINST:-}" ]]; then
    record+=(--anchor)
  fi
  python -m pytest_dmlbench drift record "$results" "${record[@]}" \
    || echo >&2 "dmlbench: this night was not added to the history $history (the reason is above)"
  findings=(--history "$history" --threshold "${DMLBENCH_DRIFT_THRESHOLD:-10}")
  if [[ -f "$report/report.html" ]]; then
    findings+=(--html "$report/report.html")
  fi
  if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
    findings+=(--markdown "$GITHUB_STEP_SUMMARY")
  fi
  python -m pytest_dmlbench drift report "${findings[@]}" \
    || echo >&2 "dmlbench: no drift findings this night (the reason is above)"
else
  echo >&2 "dmlbench: no results file $results: nothing added to the history $history"
fi
exit "$status"
