#!/usr/bin/env bash
# The test suites under sanitizers (not part of scripts/test.sh: they take long).
#
#  1. build-asan/: everything built with -DEMBER_SANITIZE=address,undefined (GCC, as the
#     normal build); runs the C++ tests (ctest) and a slice of the Python tests on that
#     build's extension (build-asan/python/ember: links to the package sources next to the
#     instrumented _ember). UBSan aborts at its first report, so any report fails the run.
#     The Python interpreter is not built with ASan, so ASan's runtime must come first in the
#     process: LD_PRELOAD=libasan.so (and libstdc++.so, see below). Leak checking is off for Python (ASAN_OPTIONS=
#     detect_leaks=0): the interpreter and the libraries it imports (torch, NumPy) keep
#     memory until exit on purpose, which LeakSanitizer would report as leaks that are not
#     Ember's; the C++ tests run with leak checking on. allocator_may_return_null=1: tests
#     check that an allocation too large for memory is an ember::Error (malloc returns
#     null), where ASan would otherwise abort the process at the request.
#  2. build-tsan/: the runtime alone (EMBER_RUNTIME_ONLY: the thread pool, the executor, the
#     model-file reader) built with clang-19 and -fsanitize=thread; runs its tests
#     (ember_runtime_tests: executor_threads_test.cc, parallel_test.cc and the reader tests),
#     then Python threads on its runtime-only module (tests/sanitize/python_threads.py: a
#     model exported by the normal build, run from threads sharing a GraphModule, threads
#     with their own, and set_num_threads meanwhile), with TSan's runtime preloaded into
#     Python. Only the runtime is instrumented there (the model's kernels, NumPy and the
#     interpreter are not), so races inside a kernel's own memory are out of its sight.
#     Nothing in Ember links OpenMP (parallel loops run on the runtime's own thread pool,
#     src/runtime/parallel.cc), so no OpenMP runtime needs TSan instrumentation.
#
#   usage: scripts/sanitize.sh [asan|tsan]   (both by default)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what=${1:-all}
root=$PWD
bash scripts/setup.sh --sanitizers

# The Python tests of the ASan run: the model-file reader, threads, sizes, errors, the API.
PY_SLICE=(tests/python/test_model_files.py tests/python/test_threads.py
          tests/python/test_sizes.py tests/python/test_errors.py tests/python/test_scalars.py
          tests/python/test_internal_errors.py tests/python/test_api.py
          tests/python/test_frontend_errors.py)

# The package next to build $1's extension: links to its sources.
link_package() {
  for f in python/ember/*; do
    case $f in *.so | */__pycache__) continue ;; esac
    ln -sfn "$root/$f" "$1/python/ember/"
  done
}

asan() {
  local out=$root/build-asan
  cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEMBER_SANITIZE=address,undefined -DEMBER_PYTHON_OUTPUT_DIR="$out/python/ember" >/dev/null
  cmake --build "$out" -j2
  link_package "$out"
  ASAN_OPTIONS=allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$out" --output-on-failure -j2
  # libstdc++ is preloaded too: the interpreter does not link it, and ASan must find the
  # real __cxa_throw when it starts (else its throw interceptor fails a CHECK).
  local preload reports=$out/sanitizer-report
  preload="$(c++ -print-file-name=libasan.so) $(c++ -print-file-name=libstdc++.so)"
  rm -f "$reports".*
  # Reports go to files: pytest captures stderr, and a report ends the process.
  PYTHONPATH=$out/python LD_PRELOAD=$preload \
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:log_path=$reports \
    UBSAN_OPTIONS=print_stacktrace=1:log_path=$reports \
    python3 -m pytest -q -p no:cacheprovider "${PY_SLICE[@]}" || {
    cat "$reports".* 2>/dev/null
    return 1
  }
  # (ASan also writes a warning there for each allocation too large for memory, which the
  # size tests make on purpose and which returns null: not a report.)
  if compgen -G "$reports.*" >/dev/null && grep -q -E "ERROR|runtime error|SUMMARY" "$reports".*; then
    cat "$reports".*
    return 1
  fi
}

tsan() {
  local out=$root/build-tsan
  cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DEMBER_RUNTIME_ONLY=ON \
    -DEMBER_BUILD_PYTHON=ON -DEMBER_PYTHON_OUTPUT_DIR="$out/python/ember" \
    -DEMBER_BUILD_TESTS=OFF -DEMBER_RUNTIME_TESTS=ON -DEMBER_SANITIZE=thread >/dev/null
  cmake --build "$out" -j2
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir "$out" --output-on-failure -j2
  # The Python threads: the model comes from the normal build, the runtime from this one.
  bash scripts/build.sh
  link_package "$out"
  local models=$out/python-threads
  rm -rf "$models" && mkdir -p "$models"
  PYTHONPATH=$root/python python3 tests/sanitize/python_threads.py export "$models"
  PYTHONPATH=$out/python LD_PRELOAD=$(clang++-19 -print-file-name=libclang_rt.tsan-x86_64.so) \
    TSAN_OPTIONS=halt_on_error=1 python3 tests/sanitize/python_threads.py run "$models"
}

case $what in
  asan) asan ;;
  tsan) tsan ;;
  all) asan && tsan ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan]" >&2 && exit 2 ;;
esac
echo "sanitize: clean ($what)"
