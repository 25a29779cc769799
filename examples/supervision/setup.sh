#!/usr/bin/env bash
# Pack each sub-capsule and file it in this project's store (as local/<name>), where
# delegate-task finds it by name and exact version.
set -euo pipefail
cd "$(dirname "$0")"
MUR=${MUR:-mur}
for c in answerer crasher hanger; do
  "$MUR" build "capsules/$c" -o "$c-0.1.0.mur.zip"
  "$MUR" install "./$c-0.1.0.mur.zip"
done
