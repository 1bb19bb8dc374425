#!/usr/bin/env bash
# Makes the MediaPipe reference data that bench/fidelity.py and tests/plugins/fidelity_test
# compare nnsegment with, in assets/fidelity/ (git-ignored, ~70 MB, ~15 s):
#   frames/     25 Megamind.avi frames at native size (PNG for GStreamer, raw RGB for the browser)
#   mediapipe/  @mediapipe/tasks-vision ImageSegmenter's confidence masks for them (float32 .npy)
# Needs Debian's chromium (NN_FIDELITY=1 bash scripts/install-deps.sh) and npm.
#   bash bench/fidelity/setup.sh [--if-available] [--force]
# --if-available: without chromium, say so and succeed (the fidelity test then skips).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/bench/fidelity" data="$root/assets/fidelity"
if_available=0 force=0
for a in "$@"; do
  case "$a" in
    --if-available) if_available=1 ;;
    --force) force=1 ;;
    *) echo "fidelity/setup.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
browser="${NN_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$browser" ]; then
  msg="no chromium at $browser: install it with NN_FIDELITY=1 bash scripts/install-deps.sh"
  if ((if_available)); then echo "[fidelity] skipped ($msg); the MediaPipe fidelity test will skip"; exit 0; fi
  echo "[fidelity] $msg" >&2; exit 1
fi
model="$root/assets/models/selfie_segmentation.tflite"
[ -f "$model" ] || { echo "[fidelity] $model missing: run scripts/fetch-assets.sh" >&2; exit 1; }
if ((!force)) && [ -f "$data/mediapipe/source.txt" ] && [ "$data/mediapipe/source.txt" -nt "$here/mediapipe_masks.mjs" ]; then
  echo "[fidelity] MediaPipe masks present in $data/mediapipe (--force remakes them)"; exit 0
fi
bash "$here/fetch.sh"
/usr/bin/python3 "$here/frames.py" --out "$data/frames"
# MediaPipe Tasks takes a float model only with its input normalisation in TFLite metadata,
# which the legacy selfie model lacks: [0,1], as MediaPipe's own selfie graph feeds it.
/usr/bin/python3 "$here/add_tflite_metadata.py" "$model" "$data/selfie_segmentation_meta.tflite" --mean 0 --std 255
rm -rf "$data/mediapipe"
node "$here/mediapipe_masks.mjs" --model "$data/selfie_segmentation_meta.tflite" --frames "$data/frames" \
  --out "$data/mediapipe" --browser "$browser"
