#!/usr/bin/env bash
# Commits baselines/ to the branch dmlbench/refresh-baselines and opens a pull request for it, or updates
# the open one. Needs the GitHub CLI (gh, preinstalled on GitHub-hosted runners) and GH_TOKEN with
# contents and pull-requests write access ("Allow GitHub Actions to create pull requests" enabled).
# Environment: REFRESH_REASON (why), RUN_URL (link to the run that recorded the figures).
set -euo pipefail
branch="dmlbench/refresh-baselines"
git config user.name "github-actions[bot]"
git config user.email "41898282+github-actions[bot]@users.noreply.github.com"
git add baselines
if git diff --cached --quiet; then
  echo "baselines/ unchanged: nothing to propose"
  exit 0
fi
base="$(git rev-parse --abbrev-ref HEAD)"
git checkout -B "$branch"
git commit -m "Refresh benchmark baselines: ${REFRESH_REASON:-manual refresh}"
git push --force origin "$branch"
# shellcheck disable=SC2016  # the backticks are markdown, not command substitution
body="$(printf 'Baselines recorded with `--dmlbench-save` by %s.\n\nReason: %s\n\nTo compare with the previous figures, download the artifact and run `python -m pytest_dmlbench compare baselines/ results.json` on the base branch.' "${RUN_URL:-a manual run}" "${REFRESH_REASON:-not given}")"
if [[ -n "$(gh pr list --head "$branch" --state open --json number --jq '.[].number')" ]]; then
  gh pr edit "$branch" --body "$body"
else
  gh pr create --base "$base" --head "$branch" --title "Refresh benchmark baselines" --body "$body"
fi
