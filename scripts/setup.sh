#!/usr/bin/env bash
# Installs what Ember needs to build and test. Idempotent: installs only what is missing.
# `setup.sh --sanitizers` also installs clang-19 and its sanitizer and libFuzzer runtimes
# (scripts/sanitize.sh, scripts/fuzz_model_file.sh); the normal setup stays without them.
# `setup.sh --ray` also installs Ray (ember.tune(runner="ray"); about 80 MB plus its
# dependencies, so only when asked).
set -euo pipefail

APT_PACKAGES=(llvm-19-dev libboost-graph-dev libgtest-dev libgmock-dev ccache graphviz
              ninja-build clang-format-19 zlib1g-dev libzstd-dev libedit-dev libxml2-dev
              libffi-dev
              nlohmann-json3-dev libfmt-dev)  # JSON of the model file; joins and tables
if [[ " $* " == *" --sanitizers "* ]]; then
  APT_PACKAGES+=(clang-19 libclang-rt-19-dev libfuzzer-19-dev)
fi
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# torch is pinned: any other spec may pull gigabytes of CUDA libraries.
PY_PACKAGES=("torch==2.13.0" numpy pytest pybind11 scikit-build-core ninja cmake
             onnxruntime onnx onnxscript  # these three: benchmark peers (benchmarks/e2e.py)
             tqdm xgboost-cpu  # ember.tune's progress bar and cost model (CPU-only xgboost)
             "transformers==5.24.0"  # test extra: real architectures from their configs
             "torchao==0.18.0")  # test extra: PT2E-quantized models (issue 45)
if [[ " $* " == *" --ray "* ]]; then
  PY_PACKAGES+=("ray==2.60.0")
fi
py_missing=$(python3 - "${PY_PACKAGES[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for spec in sys.argv[1:]:
    name, _, want = spec.partition("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        print(spec)
        continue
    if want and have.split("+")[0] != want:  # "2.13.0+cpu" is 2.13.0
        print(spec)
PY
)
if [[ -n $py_missing ]]; then
  echo "setup: pip installing" $py_missing
  # shellcheck disable=SC2086
  python3 -m pip install $py_missing
fi
