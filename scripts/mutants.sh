#!/usr/bin/env bash
# Mutation testing of the code that guards users: fences, grants, pins and archive safety.
#
#   scripts/mutants.sh [MODULE...]     # default: every module below
#
# Each module is mutated by cargo-mutants (`cargo install cargo-mutants`) and checked against
# the tests that exercise it; the kernel's modules against the kernel crate's own tests. The
# run happens in a clone of HEAD (MUTANTS_TREE, default /tmp/mur-mutants, kept between runs so
# builds stay incremental), never in this work tree. Outcomes land in mutants.out/<module>/;
# the summary prints caught / missed / timeout / unviable per module. MUTANTS_ARGS adds
# cargo-mutants arguments: `MUTANTS_ARGS=--iterate` tests again only what was not caught.
# Excluded mutants are in .cargo/mutants.toml, each with its reason. CI does not run this: on
# 2 cores the whole set takes well under an hour (see the figures in issue 18's closing note).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="${MUTANTS_TREE:-/tmp/mur-mutants}"
out="${MUTANTS_OUT:-$root/mutants.out}"

# module | file | cargo-mutants arguments (the tests it runs). `-C` passes the target selection to
# the build as well as to the test run, so each mutant links only the test binaries it runs
# (not the suite's thirty), which is most of a mutant's time.
modules=(
  "fence|actors/src/fence.rs|--test-package mur-actors --timeout 20"
  "provided|actors/src/provided.rs|--test-package mur-actors --timeout 20"
  "table|actors/src/dispatcher/table.rs|--test-package mur-actors --timeout 20"
  "children|src/children.rs|-C --lib -C --test=cli_delegation"
  "handle|src/peer/handle.rs|-C --lib -C --test=peer_handoff -C --test=peer_door"
  "names|src/manifest/names.rs|-C --lib -C --test=manifest_doctor -C --test=manifest_conformance"
  "service|src/artifact/service.rs|-C --lib -C --test=artifact_pull"
  "pull|src/artifact/pull.rs|-C --lib -C --test=artifact_pull -C --test=artifact_cli"
  "lock|src/artifact/lock.rs|-C --lib -C --test=artifact_cli -C --test=artifact_pull"
  "payload|src/artifact/payload.rs|-C --lib -C --test=artifact_cli -C --test=artifact_pull"
)
wanted=("$@")

if [ ! -d "$tree/.git" ]; then
  git clone -q "$root" "$tree"
fi
git -C "$tree" fetch -q "$root" HEAD
git -C "$tree" checkout -q --force FETCH_HEAD
# The tests read the conformance corpus from ../shared beside the repository.
if [ ! -e "$(dirname "$tree")/shared" ] && [ -d "$root/../shared" ]; then
  ln -s "$(cd "$root/../shared" && pwd)" "$(dirname "$tree")/shared"
fi

mkdir -p "$out"
for m in "${modules[@]}"; do
  IFS='|' read -r name file args <<<"$m"
  if [ "${#wanted[@]}" -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then continue; fi
  echo "== $name ($file)"
  # shellcheck disable=SC2086
  (cd "$tree" && cargo mutants --in-place --workspace --no-shuffle -f "$file" \
      -o "$out/$name" ${MUTANTS_ARGS:-} $args) >"$out/$name.log" 2>&1 || true
  tail -1 "$out/$name.log"
done

printf '\n%-10s %8s %7s %7s %8s %9s\n' module mutants caught missed timeout unviable
for m in "${modules[@]}"; do
  IFS='|' read -r name file _ <<<"$m"
  d="$out/$name/mutants.out"
  [ -d "$d" ] || continue
  c() { if [ -f "$d/$1.txt" ]; then grep -c . "$d/$1.txt" || true; else echo 0; fi; }
  total=$(( $(c caught) + $(c missed) + $(c timeout) + $(c unviable) ))
  printf '%-10s %8s %7s %7s %8s %9s\n' "$name" "$total" "$(c caught)" "$(c missed)" "$(c timeout)" "$(c unviable)"
done
missed=$(cat "$out"/*/mutants.out/missed.txt 2>/dev/null | grep -c . || true)
[ "${missed:-0}" -eq 0 ]
