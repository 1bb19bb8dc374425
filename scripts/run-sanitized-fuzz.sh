#!/usr/bin/env bash
# Builds the mutation fuzz test with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DNN_SANITIZE=ON) in build-asan/ and runs it: >= 1000 mutated .nnapi, .tflite and .onnx
# files each through the readers, then the CPU delegate op tests and the whole-model tests
# (nnpipe's native kernels); any sanitizer report fails the run.
# Called by scripts/test.sh. Env: NN_FUZZ_ITERATIONS (default 1000 per real seed),
# NN_FUZZ_SEED, NN_ASAN_BUILD_DIR (default <root>/build-asan), JOBS (default 2).
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
echo "[sanitized-fuzz] building mutation_fuzz_test and the CPU delegate tests"
cmake --build "$build" --target mutation_fuzz_test cpu_delegate_ops_test whole_model_test -j "$jobs"

# halt_on_error: the first report fails the run. Leak checking stays on where the
# platform allows it (LeakSanitizer needs ptrace-free /proc access; off under some sandboxes).
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"
cd "$build"
echo "[sanitized-fuzz] running (ASAN_OPTIONS=$ASAN_OPTIONS)"
start=$(date +%s)
status=0
./tests/mutation_fuzz_test --gtest_color=no || status=$?
# The CPU delegate's native kernels index raw buffers (tails, padding taps, arena slots):
# every op at odd sizes and the four real models, under the same sanitizers.
for t in cpu_delegate_ops_test whole_model_test; do
  echo "[sanitized-fuzz] $t"
  ./tests/$t --gtest_color=no --gtest_brief=1 || status=$?
done
echo "[sanitized-fuzz] finished in $(( $(date +%s) - start )) s, exit $status"
exit $status
