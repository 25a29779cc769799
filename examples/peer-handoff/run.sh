#!/usr/bin/env bash
# Run the handoff: the inbox first (it must be live to be addressed), then the outbox.
# Usage: examples/peer-handoff/run.sh [path/to/mur]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mur="${1:-mur}"
work="$(mktemp -d)"
task="{\"handoff\":\"$work/handoff.json\",\"done\":\"$work/done\"}"

"$mur" run "$here/inbox" --workdir "$work/inbox" --task "$task" > "$work/inbox.out" &
inbox=$!
until grep -q '^session: ' "$work/inbox.out" 2>/dev/null; do sleep 0.1; done
port="$(sed -n 's/^murmur: url localhost:\([0-9]*\)$/\1/p' "$work/inbox.out")"
session="$(sed -n 's/^session: //p' "$work/inbox.out")"
echo "inbox is at localhost:$port/$session"

peer_task="{\"peer\":\"localhost:$port/$session\",\"handoff\":\"$work/handoff.json\",\"done\":\"$work/done\"}"
"$mur" run "$here/outbox" --workdir "$work/outbox" --task "$peer_task"
wait "$inbox"
cat "$work/inbox.out"
echo "--- the inbox's answer:"
cat "$work/inbox/.murmur/$session/out/result.txt"
echo
echo "--- stored at:"
ls "$work/inbox/peer-in/"
