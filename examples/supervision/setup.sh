#!/usr/bin/env bash
# Pack each sub-capsule and file it in this project's store (as local/<name>), where
# delegate-task finds it by name and exact version.
set -euo pipefail
cd "$(dirname "$0")"
MUR=${MUR:-mur}
if ! command -v "$MUR" >/dev/null 2>&1; then
  echo "$0: no '$MUR' to run: put mur on your PATH with 'cargo install --path .' at the repository root, or set MUR=/path/to/mur" >&2
  exit 127
fi
for c in answerer crasher hanger; do
  "$MUR" build "capsules/$c" -o "$c-0.1.0.mur.zip"
  "$MUR" install "./$c-0.1.0.mur.zip"
done
