#!/usr/bin/env bash
# The main job: set everything up, then replace the background of the sample video
# (opencv-doc's Megamind.avi), denoise its soundtrack (made noisy with a recorded noise)
# and segment messi5.jpg. Outputs land in assets/out/;
# a window opens too when a display is there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bin="$root/build/engine" out="$root/assets/out" models="$root/assets/models"
mkdir -p "$out"

"$bin/nnconvert" "$models/selfie_segmentation.tflite" -o "$models/selfie_segmentation.nnapi"
"$bin/nnmask" "$models/selfie_segmentation.nnapi" "$root/assets/media/messi5.jpg" \
  -o "$out/messi5_mask.png" --composite "$out/messi5_blur.jpg"

# The soundtrack made noisy and denoised first: demo-video.sh puts it under the video.
bash "$root/scripts/demo-audio.sh"
if [ -x "$root/scripts/demo-video.sh" ]; then
  bash "$root/scripts/demo-video.sh"
fi
echo "outputs in $out:"
ls -l "$out"
