#!/usr/bin/env bash
# Installs the project for the CI jobs. torch/torchvision are pinned here only (the package leaves them
# unpinned so users bring their own build); the CPU wheels keep the download small.
set -euo pipefail
python -m pip install --upgrade pip
python -m pip install torch==2.14.1 torchvision==0.29.1 --extra-index-url https://download.pytorch.org/whl/cpu
python -m pip install -e ".[test]"
python -c "import torch, pytest_dmlbench; print('torch', torch.__version__)"
