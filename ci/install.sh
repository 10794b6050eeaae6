#!/usr/bin/env bash
# Installs the project for the CI jobs. torch/torchvision are pinned here only (the package leaves them
# unpinned so users bring their own build); the CPU wheels keep the download small.
# `bash ci/install.sh floor` installs the oldest torch the package declares (pyproject.toml) instead.
set -euo pipefail
case "${1:-pinned}" in
    pinned) pins=(torch==2.14.1 torchvision==0.29.1) ;;
    floor) pins=(torch==2.3.1 torchvision==0.18.1) ;;
    *) echo "usage: $0 [pinned|floor]" >&2; exit 2 ;;
esac
python -m pip install --upgrade pip
python -m pip install "${pins[@]}" --extra-index-url https://download.pytorch.org/whl/cpu
# The pins again, so that nothing the test extra pulls in moves torch off them.
python -m pip install -e ".[test]" "${pins[@]}" --extra-index-url https://download.pytorch.org/whl/cpu
python -c "import torch, pytest_dmlbench; print('torch', torch.__version__)"
