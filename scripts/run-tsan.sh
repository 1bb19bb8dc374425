#!/usr/bin/env bash
# ThreadSanitizer run of the code that runs on several threads: the runtime (Session,
# AsyncSession's worker), the GStreamer plugin (streaming threads, property changes from
# the application thread, nnbackground's background pad) and their tests. Builds in
# build-tsan/ (scripts/tsan/tsan.cmake says what is instrumented, and why not the
# kernels), preloads scripts/tsan/glib_sync.c (TSan sees GLib's futex-based locks) and
# opencv_one_thread.c, and fails on any report (scripts/tsan/suppressions.txt: third-party
# libraries only). Called by scripts/test.sh.
# Env: NN_TSAN_BUILD_DIR (default <root>/build-tsan), JOBS (default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${NN_TSAN_BUILD_DIR:-$root/build-tsan}"
jobs="${JOBS:-2}"
start=$(date +%s)

generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
echo "[tsan] configuring $build"
mkdir -p "$build"
cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PROJECT_INCLUDE="$root/scripts/tsan/tsan.cmake" -DNN_BUILD_BENCH=OFF -DNN_BUILD_TESTS=ON \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
targets=(async_session_test segmenter_test nnsegment_test nnbackground_test nnsegment_classes_test maskmeta_test)
echo "[tsan] building ${targets[*]}"
cmake --build "$build" --target "${targets[@]}" -j "$jobs"
cc -O1 -g -fPIC -shared -o "$build/libnn_tsan_preload.so" "$root/scripts/tsan/glib_sync.c" \
  "$root/scripts/tsan/opencv_one_thread.c" -ldl
built=$(date +%s)

# halt_on_error=0 and exitcode: every report is printed, and any one fails the run.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0:exitcode=66:second_deadlock_stack=1:report_signal_unsafe=0:suppressions=$root/scripts/tsan/suppressions.txt}"
# GLib's locks made visible to TSan, OpenCV on one thread (scripts/tsan/*.c say why).
export LD_PRELOAD="$build/libnn_tsan_preload.so${LD_PRELOAD:+:$LD_PRELOAD}"
export GST_PLUGIN_PATH="$build/plugins" GST_REGISTRY="$build/tsan-registry.bin"
export GST_REGISTRY_FORK=no  # the instrumented plugin loads only into an instrumented process
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/nnpipe-xdg}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
# Registries written when the tests were listed at build time hold the plugin as unloadable
# (GStreamer's scanner process is not instrumented): rescan in-process.
rm -f "$build"/tests/plugins/*.registry.bin "$GST_REGISTRY"
status=0
cd "$build"
# Left out: tests of real-time pacing and whole clips (TSan runs code 5-15x slower).
skip="-NnBackgroundVideoPipeline.MegamindOverBall:NnBackgroundVideoTest.BackgroundIsPacedToTheMainStream"
for t in tests/async_session_test tests/plugins/segmenter_test tests/plugins/maskmeta_test tests/plugins/nnsegment_test \
         tests/plugins/nnbackground_test tests/plugins/nnsegment_classes_test; do
  echo "[tsan] $t"
  log="$build/$(basename "$t").tsan.log"
  "./$t" --gtest_color=no --gtest_brief=1 --gtest_filter="$skip" >"$log" 2>&1 || status=$?
  reports=$(grep -c "^WARNING: ThreadSanitizer" "$log" || true)
  grep -E "^\[  (PASSED|FAILED)|^WARNING: ThreadSanitizer" "$log" | sort | uniq -c || true
  if [ "$reports" != "0" ]; then
    echo "[tsan] $t: $reports reports (full log: $log)"
    status=1
  fi
done
echo "[tsan] build $((built - start)) s, run $(($(date +%s) - built)) s, exit $status"
exit $status
