#!/usr/bin/env bash
# Sets everything up, then runs every test: ctest (unit, ops, importers, conformance,
# runtime, plugin, pipeline), the sanitizer fuzz run and the ThreadSanitizer run. Prints
# ctest's summary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# The test command also installs Debian's chromium, so the MediaPipe fidelity test runs
# (NN_FIDELITY=0 leaves it out and that test skips, saying so).
export NN_FIDELITY="${NN_FIDELITY:-1}"
bash "$root/scripts/setup.sh"
bash "$root/bench/fidelity/setup.sh" --if-available  # MediaPipe's masks, when chromium is there
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/nnpipe-xdg}"; mkdir -p "$XDG_RUNTIME_DIR"; chmod 700 "$XDG_RUNTIME_DIR"
status=0 ctest_status=0 sanitized_status=0 tsan_status=0
# ctest's output is kept in build/ so its summary and failures can be printed again at the
# end: the sanitizer stages print hundreds of lines after it, and CI logs keep only a tail.
ctest_log="$root/build/ctest-output.log"
(cd "$root/build" && ctest --output-on-failure -j2 --timeout 900) 2>&1 | tee "$ctest_log" \
  || ctest_status=$?
if [ -x "$root/scripts/run-sanitized-fuzz.sh" ]; then
  bash "$root/scripts/run-sanitized-fuzz.sh" 2>&1 | tee "$root/build/sanitized-output.log" \
    || sanitized_status=$?
fi
if [ -x "$root/scripts/run-tsan.sh" ]; then
  bash "$root/scripts/run-tsan.sh" || tsan_status=$?
fi
echo
echo "== test summary =="
# Which kernels ran: the CPU delegate picks AVX-512 / AMX / AVX-VNNI / AVX2 paths by host.
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(grep -m1 -o -w -E \
  'avx2|fma|avx512f|avx512_vnni|avx_vnni|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
grep -E 'tests passed|tests failed out of|Total Test time' "$ctest_log" || echo "ctest printed no summary"
# ctest lists its failures after "The following tests FAILED:"
sed -n '/The following tests FAILED:/,$p' "$ctest_log" | grep -E '^[[:space:]]+[0-9]+ - ' || true
echo "ctest exit $ctest_status"
grep -E 'FAILED|ERROR: AddressSanitizer|runtime error:|\[sanitized-fuzz\] finished' \
  "$root/build/sanitized-output.log" 2>/dev/null | head -20 || true
echo "sanitized stage exit $sanitized_status, tsan stage exit $tsan_status"
[ "$ctest_status" -eq 0 ] && [ "$sanitized_status" -eq 0 ] && [ "$tsan_status" -eq 0 ] || status=1
exit $status
