#!/usr/bin/env bash
# Run the coding capsule on a fresh copy of the buggy crate (the capsule edits its work folder).
set -euo pipefail
cd "$(dirname "$0")"
MUR=${MUR:-mur}
if ! command -v "$MUR" >/dev/null 2>&1; then
  echo "$0: no '$MUR' to run: put mur on your PATH with 'cargo install --path .' at the repository root, or set MUR=/path/to/mur" >&2
  exit 127
fi
rm -rf work && cp -r crate work
"$MUR" run --task task.md -v --workdir work
