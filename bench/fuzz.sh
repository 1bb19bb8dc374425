#!/usr/bin/env bash
# libFuzzer campaign over nnpipe's untrusted-input parsers (tests/fuzz/targets/):
#   nnapi_reader   .nnapi files (load_nnapi_buffer, read_nnapi_file_info)
#   tflite_import  TFLite flatbuffers (import_tflite_buffer)
#   onnx_import    ONNX protobufs (import_onnx_buffer)
#   graph_file     graph files (GraphFile::parse, resolve_params, substitute)
# Every model a reader accepts is validated again and, when small, run with the reference
# kernels (tests/fuzz/targets/model_checks.h). Built with clang's
# -fsanitize=fuzzer,address,undefined in build-fuzz/ (tests/fuzz/libfuzzer/CMakeLists.txt).
#
#   bench/fuzz.sh                  campaign: 1,000,000 executions per target
#   bench/fuzz.sh --runs N         N executions per target
#   bench/fuzz.sh --time S         S seconds per target (the CI slice: --time 20)
#   bench/fuzz.sh --targets "onnx_import graph_file"
#
# Seeds: the real models (assets/models: the selfie .tflite files split into one-operation
# models, by tests/fuzz/seeds/split_tflite.py), ONNX's own node-test models
# (libonnx-testdata), .nnapi files converted from those, the shipped graphs (graphs/*.toml,
# tests/graphs/data) and any raw regression inputs (tests/fuzz/regressions/<target>/). Model
# inputs are capped at 64 KB (-max_len): whole models ran at a few hundred executions a
# second; ctest replays them whole through the same targets (fuzz_regressions_*). The corpus grows in
# $NN_FUZZ_DIR/corpus/<target> (default /var/tmp/nnpipe-fuzz, outside git) and is reused by
# the next campaign. Findings (crash-*, timeout-*, leak-*, oom-*) land in
# $NN_FUZZ_DIR/artifacts/<target>/; a finding does not stop the campaign (the target is
# restarted until its budget is spent), and the script exits 1 if there was any.
# Per-input limits: -timeout (hang) 10 s, -rss_limit_mb 2048, leaks checked (-detect_leaks=1).
# Env: NN_FUZZ_DIR, NN_FUZZ_BUILD_DIR (default <root>/build-fuzz), JOBS (default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${NN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
work="${NN_FUZZ_DIR:-/var/tmp/nnpipe-fuzz}"
jobs="${JOBS:-2}"
runs=1000000
seconds=0
targets="nnapi_reader tflite_import onnx_import graph_file"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; seconds=0; shift 2 ;;
    --time) seconds="$2"; runs=0; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench/fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cxx="${NN_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}"
[ -n "$cxx" ] || { echo "[fuzz] clang++ not found (Debian: clang-14 libclang-rt-14-dev)" >&2; exit 2; }

# ---- build ---------------------------------------------------------------------------
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
mkdir -p "$build"
build_start=$(date +%s)
cmake -S "$root/tests/fuzz/libfuzzer" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
  "${launcher[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 2; }
cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 2; }
echo "[fuzz] built in $(( $(date +%s) - build_start )) s ($build)"

# ---- seeds ---------------------------------------------------------------------------
seeds="$work/seeds"
models="$root/assets/models"
onnx_nodes=/usr/share/libonnx-testdata/data/node
make_seeds() {
  local t="$1" dir="$seeds/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  case "$t" in
    tflite_import)
      for m in "$models"/*.tflite; do
        [ -f "$m" ] || continue
        if command -v flatc >/dev/null 2>&1; then
          python3 "$root/tests/fuzz/seeds/split_tflite.py" "$root/engine/import/tflite/tflite_schema.fbs" "$m" "$dir" >/dev/null
        fi
      done ;;
    onnx_import)
      # ONNX's node tests (small single-op models, every op, accepted or refused by us).
      if [ -d "$onnx_nodes" ]; then
        find "$onnx_nodes" -name model.onnx -size -8k | while read -r m; do
          cp "$m" "$dir/$(basename "$(dirname "$m")").onnx"
        done
      fi ;;
    nnapi_reader)
      # Small models only (the reader's run costs grow with the file: the CRC alone runs
      # twice per input): the selfie model's one-op parts, and ONNX's node tests.
      local inputs=()
      for m in "$seeds/tflite_import"/*_[0-9][0-9][0-9]_*.tflite; do [ -f "$m" ] && inputs+=("$m"); done
      # The claimed ops' node tests: the ONNX ops the importer converts.
      if [ -d "$onnx_nodes" ]; then
        while read -r op; do
          case "$op" in ''|'#'*|'!'*) continue ;; esac
          for m in "$onnx_nodes"/test_"$(echo "$op" | tr '[:upper:]' '[:lower:]')"*/model.onnx; do
            [ -f "$m" ] && inputs+=("$m")
          done
        done <"$root/tests/conformance/claimed_ops.txt"
      fi
      ASAN_OPTIONS=detect_leaks=0 "$build/make_nnapi_seed" "$dir" "${inputs[@]}" >/dev/null ;;
    graph_file)
      cp "$root"/graphs/*.toml "$root"/tests/graphs/data/*.toml "$dir/" ;;
  esac
  if [ -d "$root/tests/fuzz/regressions/$t" ]; then
    cp "$root/tests/fuzz/regressions/$t"/* "$dir/" 2>/dev/null || true
  fi
}

# ---- campaign ------------------------------------------------------------------------
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
report="$work/report.txt"
mkdir -p "$work"
printf '%-14s %12s %8s %8s %8s %8s %6s %6s %8s\n' target executions exec/s seconds corpus crashes hangs leaks ooms | tee "$report"
total_findings=0
for t in $targets; do
  bin="$build/${t}_fuzz"
  [ -x "$bin" ] || { echo "[fuzz] unknown target '$t'" >&2; exit 2; }
  # The nnapi seeds are converted from the tflite ones.
  if [ "$t" = nnapi_reader ] && [ ! -d "$seeds/tflite_import" ]; then make_seeds tflite_import; fi
  [ -d "$seeds/$t" ] || make_seeds "$t"
  # Model inputs up to 64 KB: the whole real models (250 KB .tflite, 13 MB .onnx) ran at a
  # few hundred executions a second; they are replayed whole by ctest (fuzz_regressions_*),
  # and their operators reach the fuzzer as one-op models.
  max_len=(-max_len=65536)
  [ "$t" = graph_file ] && max_len=()
  corpus="$work/corpus/$t"; artifacts="$work/artifacts/$t"; logs="$work/logs/$t"
  mkdir -p "$corpus" "$artifacts" "$logs"
  stamp="$logs/.start"; touch "$stamp"  # this campaign's findings are the newer ones
  done_runs=0; start=$(date +%s); round=0
  while :; do
    round=$((round + 1))
    budget=()
    if [ "$seconds" -gt 0 ]; then
      left=$(( seconds - ($(date +%s) - start) )); [ "$left" -gt 0 ] || break
      budget=(-max_total_time="$left")
    else
      left=$(( runs - done_runs )); [ "$left" -gt 0 ] || break
      budget=(-runs="$left")
    fi
    log="$logs/round$round.log"
    status=0
    "$bin" "${budget[@]}" "${max_len[@]}" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "$corpus" "$seeds/$t" >"$log" 2>&1 || status=$?
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    done_runs=$(( done_runs + ${n:-0} ))
    if [ "$status" -ne 0 ]; then
      echo "[fuzz] $t: finding in round $round (exit $status), see $log" >&2
      grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log" >&2 || true
      [ "$round" -lt 50 ] || { echo "[fuzz] $t: 50 findings, giving up on it" >&2; break; }
    else
      break
    fi
  done
  elapsed=$(( $(date +%s) - start ))
  count() { find "$artifacts" -type f -name "$1-*" -newer "$stamp" | wc -l; }
  crashes=$(count crash); hangs=$(count timeout); leaks=$(count leak); ooms=$(count oom)
  total_findings=$(( total_findings + crashes + hangs + leaks + ooms ))
  printf '%-14s %12d %8d %8d %8d %8d %6d %6d %8d\n' "$t" "$done_runs" $(( done_runs / (elapsed > 0 ? elapsed : 1) )) \
    "$elapsed" "$(find "$corpus" -type f | wc -l)" "$crashes" "$hangs" "$leaks" "$ooms" | tee -a "$report"
done
echo "[fuzz] report: $report; corpus: $work/corpus; findings: $work/artifacts"
[ "$total_findings" -eq 0 ]
