#!/usr/bin/env bash
# The sound half of the demo: the sample video's soundtrack (Megamind.avi, AC3) made noisy
# with a real recording (lincity-ng-data's fire recordings, Debian, GPL-2+) at 5 dB SNR,
# then denoised by nndenoise through the denoise-file graph. Writes to assets/out/:
#   denoise-before.wav  the noisy soundtrack (16 kHz mono, what nndenoise takes)
#   denoise-after.wav   nndenoise's output (same length and timing)
#   denoise-spectrogram.png  before and after, one above the other
#   librispeech-noisy.wav  the package's LibriSpeech clip with the same noise at 5 dB SNR
# demo-video.sh then puts denoise-after.wav under the blurred video.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${NN_BUILD_DIR:-$root/build}"
export GST_PLUGIN_PATH="$build/plugins${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
out="$root/assets/out" media="$root/assets/media"
noise_dir="$media/noise" work="$out/denoise-work"
mkdir -p "$out" "$noise_dir" "$work"
if [ ! -x "$build/graphs/nngraph" ] || [ ! -f "$build/plugins/libgstnnpipe.so" ]; then
  echo "demo-audio: nngraph or the plugin is not built (GStreamer missing at configure time?); skipping" >&2
  exit 0
fi

# The noise: three fire recordings from Debian's lincity-ng-data, fetched and sha256-checked
# by scripts/fetch-assets.sh (setup).
for f in Fire1.wav Fire2.wav Fire3.wav; do
  [ -f "$noise_dir/$f" ] || { echo "demo-audio: $noise_dir/$f missing: run scripts/setup.sh" >&2; exit 1; }
done

# Everything at the model's rate, mono, 16-bit: the soundtrack and the noise.
to16k() {
  gst-launch-1.0 -q filesrc location="$1" ! decodebin ! audioconvert ! audioresample ! \
    audio/x-raw,format=S16LE,rate=16000,channels=1 ! wavenc ! filesink location="$2"
}
to16k "$media/Megamind.avi" "$work/soundtrack.wav"
for f in Fire1 Fire2 Fire3; do to16k "$noise_dir/$f.wav" "$work/$f.wav"; done
/usr/bin/python3 "$root/demos/mix_noise.py" "$work/soundtrack.wav" "$work/Fire1.wav" "$work/Fire2.wav" \
  "$work/Fire3.wav" --snr 5 -o "$out/denoise-before.wav"
# The LibriSpeech clip the same way: the README's gst-launch example denoises it.
to16k "$media/librispeech-7729-102255-0000.wav" "$work/librispeech.wav"
/usr/bin/python3 "$root/demos/mix_noise.py" "$work/librispeech.wav" "$work/Fire2.wav" "$work/Fire3.wav" \
  "$work/Fire1.wav" --snr 5 -o "$out/librispeech-noisy.wav"

# nndenoise through the shipped graph (the same element a gst-launch line uses).
"$build/graphs/nngraph" run denoise-file location="$out/denoise-before.wav" out="$out/denoise-after.wav" \
  >"$work/denoise-file.log" 2>&1 || { cat "$work/denoise-file.log" >&2; exit 1; }
echo "demo-audio: wrote $out/denoise-before.wav and $out/denoise-after.wav"

spectrogram="$root/bench/denoise/spectrogram.py"
if [ -f "$spectrogram" ]; then
  /usr/bin/python3 "$spectrogram" "$out/denoise-before.wav" "$out/denoise-after.wav" \
    -o "$out/denoise-spectrogram.png" --title "Megamind.avi soundtrack + fire noise (5 dB SNR), before and after nndenoise"
  echo "demo-audio: wrote $out/denoise-spectrogram.png"
else
  echo "demo-audio: $spectrogram is not there: no spectrogram" >&2
fi

rm -rf "$work"
