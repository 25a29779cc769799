#!/usr/bin/env bash
# Run the handoff: the inbox first (it must be live to be addressed), then the outbox.
# Usage: examples/peer-handoff/run.sh [path/to/mur]   (default: $MUR, else mur on PATH)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mur="${1:-${MUR:-mur}}"
if ! command -v "$mur" >/dev/null 2>&1; then
  echo "$0: no '$mur' to run: put mur on your PATH with 'cargo install --path .' at the repository root, pass its path, or set MUR=/path/to/mur" >&2
  exit 127
fi
work="$(mktemp -d)"
mkdir -p "$work/inbox" "$work/outbox"
# Each capsule reads and writes only its own work folder: the handle file and the "done" mark
# are relayed between the two folders here, as a message bus would between real agents.
task='{"handoff":"handoff.json","done":"done"}'
(
  until [ -e "$work/outbox/handoff.json" ]; do sleep 0.1; done
  cp "$work/outbox/handoff.json" "$work/inbox/handoff.json"
  until [ -e "$work/inbox/done" ]; do sleep 0.1; done
  touch "$work/outbox/done"
) &

"$mur" run "$here/inbox" --workdir "$work/inbox" --task "$task" > "$work/inbox.out" &
inbox=$!
until grep -q '^session: ' "$work/inbox.out" 2>/dev/null; do sleep 0.1; done
port="$(sed -n 's/^murmur: url localhost:\([0-9]*\)$/\1/p' "$work/inbox.out")"
session="$(sed -n 's/^session: //p' "$work/inbox.out")"
echo "inbox is at localhost:$port/$session"

peer_task="{\"peer\":\"localhost:$port/$session\",\"handoff\":\"handoff.json\",\"done\":\"done\"}"
"$mur" run "$here/outbox" --workdir "$work/outbox" --task "$peer_task"
wait "$inbox"
cat "$work/inbox.out"
echo "--- the inbox's answer:"
cat "${HOME}/.murmur/records${work}/inbox/$session/out/result.txt"
echo
echo "--- stored at:"
ls "$work/inbox/peer-in/"
