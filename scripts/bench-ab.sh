#!/usr/bin/env bash
# `npm run bench:ab -- <ref> <benchmark> [rounds]`: one benchmark of this checkout (B) against the same benchmark
# of an earlier commit (A), in one run. A is checked out once outside this tree (EVENTMESH_BENCH_AB_DIR, default
# $TMPDIR/eventmesh-bench-ab/<sha>), installed and built there, and shares this checkout's servers and tools. The two then take turns, one round each, for `rounds` rounds (default 5), in an order that alternates
# (A B, B A, A B, ...), so the host's load falls on both alike. Each side runs its own `npm run bench:<benchmark>`
# with BENCH_ROUNDS=1 against its own database (the schemas of the two commits may differ; the Temporal namespace
# is the caller's, which the two use in turn); every other BENCH_* and EVENTMESH_* setting of the caller applies to
# both. Each benchmark measures its path against its baseline in the same round, so the comparison is
# of those ratios: the summary (scripts/bench-ab-summary.ts) pairs the lines that print the same ratio on both
# sides and shows, per ratio, every round of A and B, their medians and whether the medians differ by more than
# the rounds' spread. Every round's whole output is kept in .data/bench-ab/logs/.
#
#   npm run bench:ab -- a7267d0 publish 5
#   BENCH_EVENTS=6000 npm run bench:ab -- a7267d0 e2e
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ref=${1:?usage: npm run bench:ab -- <ref> <benchmark> [rounds]}
bench=${2:?usage: npm run bench:ab -- <ref> <benchmark> [rounds]}
rounds=${3:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench:ab: rounds must be a positive integer, got '$rounds'" >&2; exit 2; }
sha=$(git rev-parse --verify --quiet "$ref^{commit}") || { echo "bench:ab: '$ref' names no commit of this repository" >&2; exit 2; }
node -e "process.exit(require('./package.json').scripts['bench:$bench'] ? 0 : 1)" \
  || { echo "bench:ab: this checkout has no script bench:$bench" >&2; exit 2; }
git show "$sha:package.json" | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>process.exit(JSON.parse(s).scripts['bench:$bench']?0:1))" \
  || { echo "bench:ab: commit ${sha:0:10} has no script bench:$bench (the benchmark is newer: nothing to compare with)" >&2; exit 2; }

# Where the earlier commits are checked out (outside this tree: tools that walk it must not meet a second copy).
ab=${EVENTMESH_BENCH_AB_DIR:-${TMPDIR:-/tmp}/eventmesh-bench-ab}
# B as it is when the run starts: its commit, and whether uncommitted changes are in its build.
this=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.data' || echo ' with uncommitted changes')
other=$ab/${sha:0:12}
logs=$ROOT/.data/bench-ab/logs/$(date -u +%Y%m%dT%H%M%SZ)-$bench
mkdir -p "$logs"
if [[ ! -d $other ]]; then
  echo "[bench:ab] checking out ${sha:0:10} in $other"
  git worktree add --detach "$other" "$sha" >/dev/null
fi
# The same servers and tools: its scripts/infra.sh then sees the servers this checkout started as its own.
for d in .data .tools; do [[ -L $other/$d ]] || { rm -rf "${other:?}/$d"; ln -s "$ROOT/$d" "$other/$d"; }; done
# Its own install and build (its lock file, its code); its scripts/prepare.sh rebuilds only when its sources changed.
(cd "$other" && bash scripts/prepare.sh)
bash scripts/prepare.sh

run_side() { # side tree round
  local side=$1 tree=$2 round=$3 log=$logs/$1-$3.log
  echo "[bench:ab] round $round/$rounds: $side -> $log"
  (cd "$tree" && BENCH_ROUNDS=1 EVENTMESH_POSTGRES_DATABASE=eventmesh_bench_ab_${side,,} \
    BENCH_CONNECTORS_APP_DB=eventmesh_bench_ab_app_${side,,} npm run --silent "bench:$bench") >"$log" 2>&1 || { echo "[bench:ab] $side round $round failed: tail of $log" >&2; tail -20 "$log" >&2; exit 1; }
}
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then run_side A "$other" $r; run_side B "$ROOT" $r; else run_side B "$ROOT" $r; run_side A "$other" $r; fi
done
node dist/scripts/bench-ab-summary.js "$logs" "${sha:0:10}" "$this"
