#!/usr/bin/env bash
# A one-turn scripted run on this disk while another job writes to it, next to the same run on
# tmpfs: the run must not get slower on the busy disk by more than its own flushes cost (a
# syncfs would also wait for the other job's dirty pages).
#
#   scripts/busy_disk.sh [RUNS]        (MUR=path/to/mur to pick the binary; default: mur on PATH)
#
# Prints the median wall time of RUNS runs (default 30) in each place, idle and beside a writer
# (dd of zeros into a file on the same disk, never synced).
set -euo pipefail
MUR=${MUR:-$(command -v mur || true)}
if [ -z "$MUR" ] || [ ! -x "$MUR" ]; then
  echo "no mur binary: cargo install --path . (or set MUR=path/to/mur)" >&2
  exit 127
fi
# The runs happen inside the test folders: a relative MUR (target/release/mur) must still name it.
MUR=$(realpath "$MUR")
RUNS=${1:-30}
DISK=$(mktemp -d "${TMPDIR:-/tmp}/mur-busy-XXXXXX")
MEM=$(mktemp -d /dev/shm/mur-busy-XXXXXX)
WRITER=""
cleanup() {
  [ -n "$WRITER" ] && kill "$WRITER" 2>/dev/null || true
  rm -rf "$DISK" "$MEM"
  # Leave the disk quiet for whatever runs next.
  sync
}
trap cleanup EXIT

for d in "$DISK" "$MEM"; do
  cat > "$d/murmur.yaml" <<'EOF'
name: busy
version: "0.1.0"
artifacts:
  - name: mur/driver-script
    version: "0.1.0"
    runtime: driver
    config:
      script: script.yaml
inference:
  transport: http
  model: scripted
  driver:
    artifact: mur/driver-script
EOF
  printf 'turns:\n  - say: done\n' > "$d/script.yaml"
done

# Median wall time (ms) of RUNS runs in folder $1.
median() {
  local dir=$1 times=()
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(date +%s%N)
    if ! (cd "$dir" && "$MUR" run --task hi >/dev/null); then
      echo "busy_disk: mur run failed in $dir" >&2
      exit 1
    fi
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}

echo "busy_disk: median of $RUNS one-turn runs; disk folder $DISK"
printf '%-34s %10s\n' "place" "median"
row() {
  local m
  m=$(median "$2")
  printf '%-34s %7s ms\n' "$1" "$m"
}
# Start from a quiet disk (what an earlier job left dirty is written first).
sync
row "tmpfs, idle" "$MEM"
row "disk, idle" "$DISK"
dd if=/dev/zero of="$DISK/other-job.bin" bs=1M count=4096 status=none 2>/dev/null &
WRITER=$!
sleep 1
row "tmpfs, another job writing" "$MEM"
row "disk, another job writing" "$DISK"
