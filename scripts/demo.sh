#!/usr/bin/env bash
# Builds Ember, then compiles and runs a small conv + batch_norm + relu network (demo.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/build.sh
PYTHONPATH=python python3 scripts/demo.py
