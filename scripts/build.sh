#!/usr/bin/env bash
# Builds the C++ libraries, the tests and the Python extension into build/ (the extension
# lands in python/ember/, so PYTHONPATH=python imports it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2
