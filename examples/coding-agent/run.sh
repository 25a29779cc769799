#!/usr/bin/env bash
# Run the coding capsule on a fresh copy of the buggy crate (the capsule edits its work folder).
set -euo pipefail
cd "$(dirname "$0")"
MUR=${MUR:-mur}
rm -rf work && cp -r crate work
"$MUR" run --task task.md -v --workdir work
