#!/usr/bin/env bash
# Everything a fresh Debian 12 machine needs, as root, idempotently: Debian packages,
# models and media (sha256-checked), reference models and goldens, the build, and DTLN's
# two stages packed into one streaming model (assets/models/dtln.nnapi, what nndenoise,
# its graphs and tests load).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/fetch-assets.sh"
bash "$root/scripts/build.sh"
"$root/build/engine/nnconvert" "$root/assets/models/dtln_1.tflite" "$root/assets/models/dtln_2.tflite" \
  --stream "$root/assets/streams/dtln.toml" -o "$root/assets/models/dtln.nnapi" >/dev/null
