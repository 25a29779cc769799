#!/usr/bin/env bash
# Build the edit tool from source, pack it as a .mur.zip, and file it in this project's store
# (as local/tool-edit), so the capsule can pull it offline. Run from this folder.
set -euo pipefail
cd "$(dirname "$0")"
MUR=${MUR:-mur}
if ! command -v "$MUR" >/dev/null 2>&1; then
  echo "$0: no '$MUR' to run: put mur on your PATH with 'cargo install --path .' at the repository root, or set MUR=/path/to/mur" >&2
  exit 127
fi
cargo build --release --quiet --manifest-path tool-edit/Cargo.toml
mkdir -p tool-edit/package/bin
# cargo puts the binary under CARGO_TARGET_DIR when it is set (relative to this folder, as here).
cp "${CARGO_TARGET_DIR:-tool-edit/target}/release/tool-edit" tool-edit/package/bin/tool-edit
"$MUR" build tool-edit/package -o tool-edit-0.2.0.mur.zip
"$MUR" install ./tool-edit-0.2.0.mur.zip
# The capsule does not declare the tool (it pulls it), so nothing pins it yet: drop the operator
# pin `mur install` just wrote. The pull will pin it with origin: runtime.
rm -f murmur.lock
