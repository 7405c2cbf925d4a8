#!/usr/bin/env bash
# The one command to run ON the GPU machine (no LLVM there; cmake, ninja, pybind11, NumPy,
# pytest and PyTorch are), from the repo root, with the directory that
#     python3 benchmarks/gpu_families.py export DIR [--target cuda]
# wrote here carried along:
#     bash scripts/gpu_run.sh DIR [gpu_families.py run options: --only, --budget-s, --no-time]
# It builds the runtime-only Python module (EMBER_RUNTIME_ONLY=ON: ember_runtime and
# _ember_runtime, no LLVM, no Boost) into $EMBER_GPU_BUILD (default build-gpu-runtime), puts
# it into a package beside copies of python/ember/*.py, and with that package first on
# PYTHONPATH runs the GPU test suite (pytest tests/gpu --artifacts DIR), then the table
# (`gpu_families.py run DIR`). Its exit status is 0 only when both pass.
set -euo pipefail
if [[ $# -lt 1 || ! -f "$1/manifest.json" ]]; then
  echo "usage: bash scripts/gpu_run.sh DIR [--only KEYS] [--budget-s S] [--no-time]" >&2
  echo "  DIR: what 'benchmarks/gpu_families.py export DIR' wrote (it has manifest.json)" >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
shift
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
build=${EMBER_GPU_BUILD:-build-gpu-runtime}
mkdir -p "$build"
build=$(cd "$build" && pwd)
pkg=$build/pkg/ember

# The GPU machine has no package manager: the runtime's sources take nlohmann/json from
# what the export shipped in DIR/include.
json=()
if [[ -f $dir/include/nlohmann/json.hpp ]]; then
  json=(-DEMBER_NLOHMANN_JSON_DIR="$dir/include")
fi
# The same configuration as tests/python/test_deploy.py's runtime-only test.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_RUNTIME_ONLY=ON \
  -DEMBER_BUILD_TESTS=OFF -DPython_EXECUTABLE="$(command -v "$python")" \
  -DEMBER_PYTHON_OUTPUT_DIR="$pkg" "${json[@]}" >"$build/configure.log" ||
  { cat "$build/configure.log" >&2; exit 1; }
ninja -C "$build" _ember_runtime >"$build/build.log" || { cat "$build/build.log" >&2; exit 1; }

# The package: the Python sources (not a full _ember a developer build may have left in
# python/ember) and the runtime-only module, so `import ember` is the runtime-only install.
(cd python/ember && find . -name '*.py' -print0) | while IFS= read -r -d '' f; do
  mkdir -p "$pkg/$(dirname "$f")"
  cp "python/ember/$f" "$pkg/$f"
done

export PYTHONPATH="$build/pkg${PYTHONPATH:+:$PYTHONPATH}"
status=0
"$python" -m pytest -q -p no:cacheprovider tests/gpu --artifacts "$dir" || status=1
"$python" benchmarks/gpu_families.py run "$dir" "$@" || status=1
exit $status
