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
status=0
(cd "$root/build" && ctest --output-on-failure -j2 --timeout 900) || status=$?
if [ -x "$root/scripts/run-sanitized-fuzz.sh" ]; then
  bash "$root/scripts/run-sanitized-fuzz.sh" || status=$?
fi
if [ -x "$root/scripts/run-tsan.sh" ]; then
  bash "$root/scripts/run-tsan.sh" || status=$?
fi
exit $status
