#!/usr/bin/env bash
# Regenerate link/startup-symbols.PROFILE.txt: the functions a short `mur` run executes, which
# build.rs hands to the linker (lld's --symbol-ordering-file) so that they sit together at the
# start of .text.
#
#   scripts/startup-symbols.sh [PROFILE]   (release, the default, or dist; needs valgrind)
#
# Symbol names carry a hash of the cargo profile they were built with, so each profile has its
# own list: `release` serves `cargo build --release` and the benches, `dist` the binary to ship.
#
# Why: the kernel maps a binary's code 64 KiB around each page a process first touches
# (fault-around). Left in the compiler's order, the ~2 MB of code a one-turn run executes is
# spread over most of mur's 12 MB of .text, and every touched 64 KiB window counts in the run's
# memory: 15 MiB peak RSS for one HTTP turn, of which 9 MiB were code pages. Grouped, the same
# run maps about 2 MiB of code.
#
# The file names symbols exactly (mangled, with their hashes). A name that no longer exists is
# skipped by the linker, so a stale file only costs memory, never a build. Names go stale with a
# toolchain or dependency upgrade. (They also went stale with any edit of our crates while those
# had several codegen units: ThinLTO renames the functions units share `name.llvm.<hash of the
# unit>`. Cargo.toml builds `mur` and `mur-actors` with one unit in `release` for that reason.)
# Rerun this script after an upgrade, or when startup_bench's peak RSS grows. Each workload
# runs once under callgrind, which records every function executed in every thread. (Not in a
# tool's contained child: valgrind cannot follow that clone, see below.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
command -v valgrind >/dev/null || { echo "$0: needs valgrind (apt install valgrind)" >&2; exit 127; }

profile=${1:-release}
cargo build --profile "$profile" --bin mur
cargo build --release -p fake-provider
# Callgrind names the binary by its real path: resolve CARGO_TARGET_DIR and symlinks.
target=$(realpath "${CARGO_TARGET_DIR:-$root/target}")
MUR="$target/$profile/mur"
work=$(mktemp -d "${TMPDIR:-/tmp}/mur-symbols-XXXXXX")
fake=""
cleanup() {
  [ -n "$fake" ] && kill "$fake" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$target/release/fake-provider" --port 0 --text done >"$work/fake.out" &
fake=$!
for _ in $(seq 100); do grep -q listening "$work/fake.out" 2>/dev/null && break; sleep 0.05; done
endpoint=$(sed -n 's/^fake-provider listening on //p' "$work/fake.out")
[ -n "$endpoint" ] || { echo "$0: fake-provider did not start" >&2; exit 1; }

# examples/openai-compatible against the fake provider, and the same capsule on the Anthropic
# driver: one turn on each HTTP driver.
cp -r examples/openai-compatible "$work/openai"
sed -i "s#http://127.0.0.1:8089/v1#$endpoint/v1#" "$work/openai/murmur.yaml"
cp -r "$work/openai" "$work/anthropic"
sed -i "s#$endpoint/v1#$endpoint#; s#driver-openai#driver-anthropic#" "$work/anthropic/murmur.yaml"
cp -r examples/hello examples/plan examples/delegation-tree "$work/"
rm -rf "$work"/*/workdir "$work"/*/.murmur
# Under valgrind a tool cannot start (it does not emulate the contained clone), so the scripts
# drop their `expect:` checks: the turns after a tool's result still run.
sed -i 's/^  - expect: .*$/  -/' "$work/hello/script.yaml" "$work/plan/script.yaml"
(cd "$work/delegation-tree" && MUR="$MUR" ./setup.sh >/dev/null)

n=0
record() { # DIR ARGS...: one run of mur in DIR under callgrind
  local dir=$1
  shift
  n=$((n + 1))
  (cd "$dir" && valgrind --tool=callgrind --trace-children=no --dump-instr=no \
    --compress-strings=no --compress-pos=no --demangle=no \
    --callgrind-out-file="$work/cg.$n.%p" "$MUR" "$@" >/dev/null 2>"$work/vg.$n.log") ||
    { echo "$0: mur $* in $dir failed under valgrind (log: $work/vg.$n.log)" >&2; cat "$work/vg.$n.log" >&2; exit 1; }
}
# Most common first: what every run executes lands at the very start.
record "$work" --version
record "$work/openai" run --task hi
record "$work/anthropic" run --task hi
record "$work/hello" run --task "Say hello"
record "$work/hello" trace show
record "$work/plan" run --task "Write a note about this machine"
record "$work/delegation-tree" run --task "Write a short article about actors"

# The functions of mur's own binary, in the order of the workloads that first ran them; within
# a workload, those with the most instructions first (counting what they call). Callgrind names
# a recursive call's deeper levels `fn'2`, `fn'3`: the same symbol.
out=link/startup-symbols.$profile.txt
mkdir -p link
for i in $(seq "$n"); do
  cat "$work"/cg."$i".* | awk -v bin="$MUR" '
    /^ob=/ { ob = substr($0, 4) }
    /^fn=/ { fn = substr($0, 4); mine = (ob == bin) }
    /^[0-9]/ && mine { cost[fn] += $2 }
    END { for (f in cost) print cost[f], f }' | sort -k1,1nr | cut -d' ' -f2-
done | sed "s/'[0-9]*$//" | awk '!seen[$0]++' | grep -v '^0x\|^(' >"$out.new"
mv "$out.new" "$out"
echo "$out: $(wc -l <"$out") functions"
