#!/usr/bin/env bash
# Background replacement on the sample video with nnbackground-demo (demos/, built on the
# graph API): blur behind the people, with the stats HUD, over the soundtrack nndenoise
# cleaned (scripts/demo-audio.sh, when it ran first). Writes assets/out/nnbackground-demo.mp4; also shows a window when a display is there (headless,
# e.g. in CI, only the file). Extra arguments go to the demo (see nnbackground-demo --help).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${NN_BUILD_DIR:-$root/build}"
demo="$build/demos/nnbackground-demo"
export GST_PLUGIN_PATH="$build/plugins${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
out="$root/assets/out/nnbackground-demo.mp4"
if [ ! -x "$demo" ]; then
  echo "demo-video: $demo is not built (GStreamer missing at configure time?); skipping the video" >&2
  exit 0
fi
outputs=file
if [ -n "${DISPLAY:-}" ]; then outputs=file,window; fi
"$demo" --input file --file "$root/assets/media/Megamind.avi" --background blur --hud \
  --output "$outputs" --out "$out" "$@"
# The soundtrack demo-audio.sh denoised goes under the picture (Opus: its encoder delay is
# recorded in the MP4, so sound and picture stay in sync; both start at 0).
denoised="$root/assets/out/denoise-after.wav"
if [ -f "$denoised" ]; then
  video_only="${out%.mp4}.video-only.mp4"
  mv "$out" "$video_only"
  gst-launch-1.0 -q mp4mux name=mux ! filesink location="$out" \
    filesrc location="$video_only" ! qtdemux ! queue ! mux.video_0 \
    filesrc location="$denoised" ! wavparse ! audioconvert ! audioresample ! opusenc ! queue ! mux.audio_0
  rm -f "$video_only"
  echo "demo-video: wrote $out (background blurred, soundtrack denoised)"
else
  echo "demo-video: wrote $out"
fi
