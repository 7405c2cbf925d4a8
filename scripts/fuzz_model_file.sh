#!/usr/bin/env bash
# Fuzzes the model-file reader with libFuzzer under ASan and UBSan for SECONDS (default
# 600): tests/fuzz/model_file_fuzz.cc, built with clang-19 into build-fuzz/ (runtime only),
# seeded with models that tests/fuzz/make_corpus.py exports (so the Python build must work;
# scripts/build.sh makes it). The corpus grows in build-fuzz/corpus across runs; a failing
# input lands in build-fuzz/findings/ (add it to tests/cpp/runtime/model_file_reader_test.cc
# once fixed). Fails on any finding, and when the run leaves a file in its temp directory.
#   usage: scripts/fuzz_model_file.sh [SECONDS] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-600}
shift || true
root=$PWD
out=$root/build-fuzz

bash scripts/setup.sh --sanitizers
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DEMBER_RUNTIME_ONLY=ON -DEMBER_BUILD_PYTHON=OFF -DEMBER_BUILD_TESTS=OFF \
  -DEMBER_FUZZ=ON -DEMBER_SANITIZE=address,undefined >/dev/null
cmake --build "$out" -j2 --target model_file_fuzz

if [[ ! -d $out/seeds ]]; then
  PYTHONPATH=python python3 -c "import ember._ember" 2>/dev/null || bash scripts/build.sh
  PYTHONPATH=python python3 tests/fuzz/make_corpus.py "$out/seeds.tmp"
  mv "$out/seeds.tmp" "$out/seeds"
fi
mkdir -p "$out/corpus" "$out/findings"
# -timeout=60: an input takes milliseconds, but under nice -n 19 on a loaded machine the
# process can be starved for seconds (a 10 s limit reported such a stall as a hang).
# The target's own temp directory (and working directory): it must stay empty.
tmp=$out/tmp
rm -rf "$tmp"
mkdir -p "$tmp"

before=$(find "$out/findings" -type f | wc -l)
status=0
(cd "$tmp" && TMPDIR=$tmp "$out/model_file_fuzz" -max_len=131072 -timeout=60 \
  -rss_limit_mb=2048 -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$out/findings/" "$@" "$out/corpus" "$out/seeds") 2>&1 |
  grep -v -E '^#[0-9]+.*(NEW|REDUCE|pulse)|NEW_FUNC' | tee "$out/fuzz.log" || status=1
left=$(find "$tmp" -mindepth 1 | wc -l)
found=$(($(find "$out/findings" -type f | wc -l) - before))
echo "fuzz_model_file: temp files left behind: $left; new inputs in build-fuzz/findings: $found"
if ((left > 0 || found > 0)); then status=1; fi
exit $status
