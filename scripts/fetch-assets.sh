#!/usr/bin/env bash
# Fetches the models and media nnpipe runs on, checks their sha256, and makes the
# PyTorch reference models with their golden outputs. Idempotent: present, verified
# files are kept. Everything lands in git-ignored folders under assets/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models="$root/assets/models" media="$root/assets/media"
mkdir -p "$models" "$media" "$root/assets/golden" "$root/assets/out"

SELFIE_PKG="@mediapipe/selfie_segmentation@0.1.1675465747"
declare -A SHA256=(
  [selfie_segmentation.tflite]=8d13b7fae74af625c641226813616a2117bd6bca19eb3b75574621fc08557f27
  [selfie_segmentation_landscape.tflite]=4aafe6223bb8dac6fac8ca8ed56852870a33051ef3f6238822d282a109962894
  [Megamind.avi]=0057387cb7e75c8fd1663b62cfdc51fa53f527795d0fe3c1fea2fd159d3130b5
  [messi5.jpg]=1d570e49654e84c7a943918537bd9e5e1ef82920152e147c834006e235be97c9
)

verified() {  # verified FILE NAME
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "${SHA256[$2]}" ]
}

need_models=0
for f in selfie_segmentation.tflite selfie_segmentation_landscape.tflite; do
  verified "$models/$f" "$f" || need_models=1
done
if ((need_models)); then
  echo "[fetch-assets] npm pack $SELFIE_PKG"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$SELFIE_PKG" >/dev/null && tar xzf ./*.tgz)
  for f in selfie_segmentation.tflite selfie_segmentation_landscape.tflite; do
    cp "$tmp/package/$f" "$models/$f.part"
    if ! verified "$models/$f.part" "$f"; then
      echo "[fetch-assets] sha256 mismatch for $f from $SELFIE_PKG" >&2
      rm -f "$models/$f.part"; rm -rf "$tmp"; exit 1
    fi
    mv "$models/$f.part" "$models/$f"
  done
  rm -rf "$tmp"
fi

data=/usr/share/doc/opencv-doc/examples/data
for f in Megamind.avi messi5.jpg; do
  if ! verified "$media/$f" "$f"; then
    cp "$data/$f" "$media/$f"
    verified "$media/$f" "$f" || { echo "[fetch-assets] sha256 mismatch for $data/$f" >&2; exit 1; }
  fi
done
echo "[fetch-assets] selfie models and media verified"

# DTLN (Westhausen & Meyer 2020), pretrained, as @vonage/noise-suppression ships it (MIT):
# the two stages as dtln_1.tflite / dtln_2.tflite, and the package's LibriSpeech clip
# (48 kHz speech). nnconvert packs the stages with assets/streams/dtln.toml.
DTLN_PKG="@vonage/noise-suppression@1.0.3"
SHA256[dtln_1.tflite]=91281a38e80fe9fd330e28eda7e16fe4e483ee5199a3e687a099939013c25de0
SHA256[dtln_2.tflite]=7ae37ec802862d8a65b5cdabfbcbbe22caaf7cd39e79adf574d15837d1520830
SHA256[librispeech-7729-102255-0000.wav]=b59aded660c94cf23a38b88390b9cc9ee66b03de3a2be4fcff4128c3acb5c911
if ! verified "$models/dtln_1.tflite" dtln_1.tflite || ! verified "$models/dtln_2.tflite" dtln_2.tflite ||
   ! verified "$media/librispeech-7729-102255-0000.wav" librispeech-7729-102255-0000.wav; then
  echo "[fetch-assets] npm pack $DTLN_PKG"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$DTLN_PKG" >/dev/null && tar xzf ./*.tgz)
  for pair in "dist/model_1.tflite:$models/dtln_1.tflite" "dist/model_2.tflite:$models/dtln_2.tflite" \
              "data/7729-102255-0000.wav:$media/librispeech-7729-102255-0000.wav"; do
    src="$tmp/package/${pair%%:*}" dst="${pair#*:}"
    cp "$src" "$dst.part"
    if ! verified "$dst.part" "$(basename "$dst")"; then
      echo "[fetch-assets] sha256 mismatch for ${pair%%:*} from $DTLN_PKG" >&2
      rm -f "$dst.part"; rm -rf "$tmp"; exit 1
    fi
    mv "$dst.part" "$dst"
  done
  rm -rf "$tmp"
fi
echo "[fetch-assets] DTLN stages and the LibriSpeech clip verified"

# Noise for the denoise demo and nndenoise's int8 test: three fire recordings from Debian's
# lincity-ng-data (GPL-2+), sha256-checked.
SHA256[Fire1.wav]=db086d29d071a575ed3d9d3a5855f8cf15b803895cbf908bfb93d6d272999691
SHA256[Fire2.wav]=dcc262c5e403f21a6466f4a2b0394653010d44bf4cb9504776f190f247e347b2
SHA256[Fire3.wav]=34d56762ec15ce1c942f4d5307de218edcbfae894aab71fca69cfa8a02623c4c
mkdir -p "$media/noise"
if ! verified "$media/noise/Fire1.wav" Fire1.wav || ! verified "$media/noise/Fire2.wav" Fire2.wav ||
   ! verified "$media/noise/Fire3.wav" Fire3.wav; then
  echo "[fetch-assets] apt-get download lincity-ng-data (the fire recordings)"
  tmp="$(mktemp -d)"
  (cd "$tmp" && apt-get download -q lincity-ng-data >/dev/null 2>&1 && dpkg-deb -x ./lincity-ng-data_*.deb x)
  for f in Fire1.wav Fire2.wav Fire3.wav; do
    cp "$tmp/x/usr/share/games/lincity-ng/sounds/$f" "$media/noise/$f"
    verified "$media/noise/$f" "$f" || { echo "[fetch-assets] sha256 mismatch for $f from lincity-ng-data" >&2; rm -rf "$tmp"; exit 1; }
  done
  rm -rf "$tmp"
fi
echo "[fetch-assets] fire recordings verified"

# People beyond Megamind's one shot, for int8 calibration of the selfie model
# (bench/int8_data.py): vtest.avi (pedestrians), basketball1/2.png from opencv-doc,
# grace_hopper.jpg from python-matplotlib-data, astronaut.png and camera.png from
# python3-skimage (apt-get download: nothing installed), sha256-checked.
SHA256[vtest.avi]=45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf
SHA256[basketball1.png]=ba06f6701f7260998b430c39b6557f775497e6ce7b1a74f0b7ea6af371bf54a6
SHA256[basketball2.png]=b3047772e0dc6c9d83c26f64894ca1a897f799f855c5574ac24b2ef934c2978e
SHA256[grace_hopper.jpg]=a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130
SHA256[astronaut.png]=88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5
SHA256[camera.png]=b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a
people="$media/people"
mkdir -p "$people"
for src in "$data/vtest.avi" "$data/basketball1.png" "$data/basketball2.png" \
           /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg; do
  f="$(basename "$src")"
  if ! verified "$people/$f" "$f"; then
    cp "$src" "$people/$f"
    verified "$people/$f" "$f" || { echo "[fetch-assets] sha256 mismatch for $src" >&2; exit 1; }
  fi
done
if ! verified "$people/astronaut.png" astronaut.png || ! verified "$people/camera.png" camera.png; then
  echo "[fetch-assets] apt-get download python3-skimage (astronaut.png, camera.png)"
  tmp="$(mktemp -d)"
  (cd "$tmp" && apt-get download -q python3-skimage >/dev/null 2>&1 && dpkg-deb -x ./python3-skimage_*.deb x)
  for f in astronaut.png camera.png; do
    cp "$tmp/x/usr/lib/python3/dist-packages/skimage/data/$f" "$people/$f"
    verified "$people/$f" "$f" || { echo "[fetch-assets] sha256 mismatch for $f from python3-skimage" >&2; rm -rf "$tmp"; exit 1; }
  done
  rm -rf "$tmp"
fi
echo "[fetch-assets] people media verified"

# A pretrained MobileNetV2 for int8 accuracy (bench/int8.py): nsfwjs's (MIT), Keras
# MobileNetV2 1.0/224, ImageNet weights frozen in its first 98 layers, the rest fine-tuned
# to 5 classes (Drawing, Hentai, Neutral, Porn, Sexy). No ImageNet-head MobileNetV2 ships in
# the npm registry or Debian. The package bundles the TensorFlow.js layers model as JS
# modules; node writes model.json and the weight shard out, scripts/convert_tfjs_keras.py
# makes the ONNX file.
NSFWJS_PKG="nsfwjs@4.3.0"
nsfw="$models/nsfwjs_mobilenet_v2"
SHA256[model.json]=feffc6868d61e412a4e7a22657a3d07a8a48df6e11688a9e25b77c23cb7b45c9
SHA256[group1-shard1of1]=8e7dddbb16acacc1bf1601b1b8a761e730ff934b7f2d7771312b2f000e5f5f13
if ! verified "$nsfw/model.json" model.json || ! verified "$nsfw/group1-shard1of1" group1-shard1of1; then
  echo "[fetch-assets] npm pack $NSFWJS_PKG"
  tmp="$(mktemp -d)"
  mkdir -p "$tmp/out"
  (cd "$tmp" && npm pack --silent "$NSFWJS_PKG" >/dev/null && tar xzf ./*.tgz && cd package &&
   node -e 'const fs = require("fs"), out = process.argv[1];
            const spec = require("./dist/models/mobilenet_v2/model.min.js");
            const shard = require("./dist/models/mobilenet_v2/group1-shard1of1.min.js");
            fs.writeFileSync(out + "/model.json", JSON.stringify(spec));
            fs.writeFileSync(out + "/group1-shard1of1", Buffer.from(shard, "base64"));' "$tmp/out")
  for f in model.json group1-shard1of1; do
    if ! verified "$tmp/out/$f" "$f"; then
      echo "[fetch-assets] sha256 mismatch for $f from $NSFWJS_PKG" >&2; rm -rf "$tmp"; exit 1
    fi
  done
  mkdir -p "$nsfw" && mv "$tmp/out/model.json" "$tmp/out/group1-shard1of1" "$nsfw/"
  rm -rf "$tmp" "$models/nsfw_mobilenet_v2.onnx"
fi
# Goldens (tests/quantize/pretrained_mobilenet_test): the converter's PyTorch rebuild of the
# Keras graph (equal to TensorFlow.js within 1.1e-6) on photos from assets/media.
nsfw_golden="$root/assets/golden/nsfw_mobilenet_v2"
if [ ! -f "$models/nsfw_mobilenet_v2.onnx" ] || [ ! -f "$nsfw_golden/grace_hopper_probabilities.npy" ]; then
  /usr/bin/python3 "$root/scripts/convert_tfjs_keras.py" "$nsfw" -o "$models/nsfw_mobilenet_v2.onnx"
  rm -rf "$nsfw_golden"
  /usr/bin/python3 "$root/scripts/convert_tfjs_keras.py" "$nsfw" --save-inputs "$nsfw_golden" \
    --labels Drawing,Hentai,Neutral,Porn,Sexy --check "$media/messi5.jpg" "$people/grace_hopper.jpg" \
    "$people/astronaut.png" "$people/camera.png" "$people/basketball1.png" >/dev/null
fi
echo "[fetch-assets] nsfwjs MobileNetV2 verified"

# PyTorch reference models + golden outputs (Debian's torch: /usr/bin/python3, not pyenv's).
/usr/bin/python3 "$root/scripts/make_reference_models.py" --assets "$root/assets"
