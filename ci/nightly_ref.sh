#!/usr/bin/env bash
# Prints the REF the nightly gates against (see nightly.sh), with its reasons on stderr.
#   DMLBENCH_AGAINST     when set, REF as given; else DMLBENCH_LAST_GREEN (the last green night's commit);
#                        else `baseline` when baselines/ record a commit; else HEAD~1.
#   DMLBENCH_ANCHOR_NIGHT  1 (an anchor night, weekly in the workflow): REF is the fixed anchor instead of the
#                        last green night, so a slowdown arriving a little each night is measured whole:
#                        DMLBENCH_ANCHOR (a pinned commit or ref) when set, else the newest release tag `v*`
#                        reachable from HEAD; with neither, exit 2 naming both. DMLBENCH_AGAINST still wins.
# A commit after REF whose message has a line "Dmlbench-Accept: <why>" accepts its change: REF moves to the
# newest such commit. REF equal to HEAD (nothing merged since) becomes HEAD~1.
set -euo pipefail
against="${DMLBENCH_AGAINST:-}"
if [[ -z "$against" && "${DMLBENCH_ANCHOR_NIGHT:-0}" == "1" ]]; then
  against="${DMLBENCH_ANCHOR:-}"
  if [[ -z "$against" ]]; then
    against="$(git describe --tags --abbrev=0 --match 'v*' HEAD 2>/dev/null || true)"
  fi
  if [[ -z "$against" ]]; then
    echo >&2 "dmlbench: an anchor night needs an anchor: set DMLBENCH_ANCHOR to a pinned commit (in the" \
      "workflow's env) or tag a release v*; neither was found"
    exit 2
  fi
  echo >&2 "dmlbench: anchor night: gating against the fixed anchor $against instead of the last green night"
fi
if [[ -z "$against" && -n "${DMLBENCH_LAST_GREEN:-}" ]]; then
  against="$DMLBENCH_LAST_GREEN"
fi
if [[ -z "$against" ]] && grep -rqs '"commit"' baselines/; then
  against="baseline"
fi
if [[ -z "$against" ]]; then
  against="HEAD~1"
fi
if [[ "$against" != "baseline" ]] && [[ "$(git rev-parse --verify --quiet "${against}^{commit}")" == "$(git rev-parse HEAD)" ]]; then
  echo >&2 "REF $against is this very commit: nothing changed since it, comparing with the parent commit"
  against="HEAD~1"
fi
# (a REF git cannot resolve is left for the plugin to report, with its fix)
if [[ "$against" != "baseline" ]] && git rev-parse --verify --quiet "${against}^{commit}" >/dev/null; then
  accepted="$(git log --format=%H --grep='^Dmlbench-Accept:' "${against}..HEAD" | head -n 1)"
  if [[ -n "$accepted" ]]; then
    echo >&2 "dmlbench: $(git log -1 --format='%h %s' "$accepted") accepts its change (Dmlbench-Accept); gating against it"
    against="$accepted"
  fi
fi
echo "$against"
