#!/usr/bin/env bash
# Builds Ember, then imports the TVM forum example network (depthwise conv + BatchNorm + ReLU,
# 1x64x128x128) from PyTorch, compiles it, checks it and times it against PyTorch (demo.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/build.sh
PYTHONPATH=python python3 scripts/demo.py
