#!/usr/bin/env bash
# Builds the mutation fuzz test with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DNN_SANITIZE=ON) in build-asan/ and runs it: >= 1000 mutated .nnapi, .tflite and .onnx
# files each through the readers, then the CPU delegate op tests and the whole-model tests
# (nnpipe's native kernels), the native kernels' own tests (tests/runtime/native_*_test but
# Winograd's: int8, AMX, k-blocked and grouped convs at odd sizes), the libFuzzer targets
# replayed on their regression inputs, and a fixed-time libFuzzer slice of each target
# (bench/fuzz.sh --time); any sanitizer report or fuzzer finding fails the run.
# Called by scripts/test.sh. Env: NN_FUZZ_ITERATIONS (default 1000 per real seed),
# NN_FUZZ_SEED, NN_ASAN_BUILD_DIR (default <root>/build-asan), JOBS (default 2),
# NN_FUZZ_SLICE_SECONDS (default 20 per libFuzzer target; 0 skips the slice).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${NN_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="${JOBS:-2}"

generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
echo "[sanitized-fuzz] configuring $build (NN_SANITIZE=ON)"
mkdir -p "$build"  # its configure log lives inside it, with the other build outputs (git-ignored)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNN_SANITIZE=ON \
  -DNN_BUILD_PLUGINS=OFF -DNN_BUILD_BENCH=OFF -DNN_BUILD_TESTS=ON >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
# The native kernels' tests, one binary per tests/runtime/native_*_test.cpp, but the Winograd
# test: its double-precision reference convs take a minute unsanitized (Winograd's tiles run
# under the sanitizers in the op and whole-model tests).
native_tests=()
for src in "$root"/tests/runtime/native_*_test.cpp; do
  name="$(basename "$src" .cpp)"
  [ "$name" = native_winograd_test ] || native_tests+=("$name")
done
echo "[sanitized-fuzz] building mutation_fuzz_test and the CPU delegate tests"
cmake --build "$build" --target mutation_fuzz_test cpu_delegate_ops_test whole_model_test "${native_tests[@]}" \
  fuzz_replay_nnapi_reader fuzz_replay_tflite_import fuzz_replay_onnx_import -j "$jobs"

# halt_on_error: the first report fails the run. Leak checking stays on where the
# platform allows it (LeakSanitizer needs ptrace-free /proc access; off under some sandboxes).
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"
cd "$build"
echo "[sanitized-fuzz] running (ASAN_OPTIONS=$ASAN_OPTIONS)"
start=$(date +%s)
status=0
./tests/fuzz/mutation_fuzz_test --gtest_color=no || status=$?
# The CPU delegate's native kernels index raw buffers (tails, padding taps, arena slots):
# every op at odd sizes and the four real models, under the same sanitizers.
for t in cpu_delegate_ops_test whole_model_test "${native_tests[@]}"; do
  echo "[sanitized-fuzz] $t"
  ./tests/$t --gtest_color=no --gtest_brief=1 || status=$?
done
echo "[sanitized-fuzz] libFuzzer regression inputs"
ctest -R '^fuzz_regressions_' --output-on-failure || status=$?
slice="${NN_FUZZ_SLICE_SECONDS:-20}"
if [ "$slice" -gt 0 ]; then
  if command -v clang++-14 >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1; then
    echo "[sanitized-fuzz] libFuzzer slice: ${slice} s per target"
    bash "$root/bench/fuzz.sh" --time "$slice" || status=$?
  else
    echo "[sanitized-fuzz] clang++ not found: libFuzzer slice skipped (scripts/install-deps.sh installs clang-14)"
  fi
fi
echo "[sanitized-fuzz] finished in $(( $(date +%s) - start )) s, exit $status"
exit $status
