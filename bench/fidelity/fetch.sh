#!/usr/bin/env bash
# Fetches what the MediaPipe reference harness needs, offline afterwards: the npm packages
# @mediapipe/tasks-vision (its JS and wasm) and playwright-core (drives a headless browser),
# checked by sha256, into assets/fidelity/npm (git-ignored). The browser is Debian's
# chromium (scripts/install-deps.sh --fidelity). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/assets/fidelity/npm"
declare -A PKGS=(
  [@mediapipe/tasks-vision@1.1.0]="mediapipe-tasks-vision-1.1.0.tgz 46fc3d3d13fa5de631915929d045be2f74bb32e909d7a5b3a322b28976f54165 tasks-vision"
  [playwright-core@1.65.1]="playwright-core-1.65.1.tgz 6f5a60be62a4fddfbe7d10c448d8fbd54547da3358f2f8a04211440471ee863e playwright-core"
)
mkdir -p "$dest"
for spec in "${!PKGS[@]}"; do
  read -r tgz sha dir <<<"${PKGS[$spec]}"
  if [ -f "$dest/$dir/.sha256" ] && [ "$(cat "$dest/$dir/.sha256")" = "$sha" ]; then continue; fi
  echo "[fidelity] npm pack $spec"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  got="$(sha256sum "$tmp/$tgz" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    echo "[fidelity] sha256 mismatch for $tgz: got $got, expected $sha" >&2
    rm -rf "$tmp"; exit 1
  fi
  rm -rf "${dest:?}/$dir"; mkdir -p "$dest/$dir"
  tar xzf "$tmp/$tgz" -C "$dest/$dir" --strip-components=1
  echo "$sha" >"$dest/$dir/.sha256"
  rm -rf "$tmp"
done
echo "[fidelity] npm packages verified in $dest"
