#!/usr/bin/env bash
# Builds Ember, then runs the C++ tests (ctest) and the Python tests and tutorials (pytest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure
# tutorials/ holds numbered lessons that run as tests (see [tool.pytest.ini_options]).
paths=(tests/python)
[[ -d tutorials ]] && paths+=(tutorials)
PYTHONPATH=python python3 -m pytest -q "${paths[@]}"
