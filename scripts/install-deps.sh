#!/usr/bin/env bash
# Installs every Debian package nnpipe needs. Idempotent: apt-get skips what is there.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config git ca-certificates ninja-build clang-format
  libgtest-dev libgmock-dev libbenchmark-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-x
  libopencv-dev opencv-doc
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
  libxnnpack-dev libpthreadpool-dev libcpuinfo-dev
  libflatbuffers-dev flatbuffers-compiler
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libfftw3-dev libsndfile1-dev
  python3-torch python3-torchvision python3-numpy python3-onnx python3-matplotlib python3-opencv python3-gst-1.0 gir1.2-gst-plugins-base-1.0
  python3-flatbuffers python3-scipy
  xvfb x11-apps imagemagick graphviz
  clang-14 libclang-rt-14-dev
)
# Debian's chromium (~350 MB) only for the MediaPipe reference harness (bench/fidelity/):
# NN_FIDELITY=1 asks for it (scripts/test.sh sets it); without it the fidelity test skips.
if [ "${NN_FIDELITY:-0}" = 1 ]; then PKGS+=(chromium); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install-deps] installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[install-deps] all Debian packages present"
fi
# npm fetches the models; a machine image may already ship Node.js with npm (nodesource),
# whose nodejs conflicts with Debian's npm, so install Debian's only when there is none.
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi
