#!/usr/bin/env bash
# Runs the whole benchmark: ompsync against `rclone copy`, a whole-file
# re-uploader and restic on a private versitygw on 127.0.0.1, and prints one
# table.
#
#   bash internal/testkit/bench/run.sh                 # everything (about 10-12 minutes on 2 cores)
#   bash internal/testkit/bench/run.sh -phases rounds  # one phase; any ompsync-bench flag works
#   bash internal/testkit/bench/run.sh -phases line -line-rtt 60ms -line-up 20   # a shaped line
#
# Environment: CORPUS (real session files, default testdata/corpus),
# BENCH_OUT (binaries, results.json, profiles; default /tmp/ompsync-bench-out).
set -euo pipefail
cd "$(dirname "$0")/../../.."

corpus=${CORPUS:-testdata/corpus}
out=${BENCH_OUT:-${TMPDIR:-/tmp}/ompsync-bench-out}
mkdir -p "$out/bin"

# rclone and restic are Debian's packages.
missing=""
command -v rclone >/dev/null || missing="$missing rclone"
command -v restic >/dev/null || missing="$missing restic"
if [ -n "$missing" ]; then
	echo "installing$missing (Debian packages)" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq >&2
	$sudo apt-get install -y -qq $missing >&2
fi
# The tests' versitygw: $OMPSYNC_TEST_VERSITYGW, PATH, or $(go env GOPATH)/bin.
if [ -z "${OMPSYNC_TEST_VERSITYGW:-}" ] && ! command -v versitygw >/dev/null &&
	[ ! -x "$(go env GOPATH)/bin/versitygw" ]; then
	echo "installing versitygw v1.8.0" >&2
	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi

go build -o "$out/bin/ompsync" ./cmd/ompsync
go build -o "$out/bin/ompsync-bench" ./internal/testkit/bench/cmd/ompsync-bench
rm -f "$out"/*.pprof "$out"/agent-*.log
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+uncommitted changes"
echo "ompsync at $commit; $(rclone version 2>/dev/null | head -1); $(restic version 2>/dev/null)"

"$out/bin/ompsync-bench" -ompsync "$out/bin/ompsync" -corpus "$corpus" -out "$out" "$@" | tee "$out/table.md"

# The top costs of each profile, for docs/BENCHMARKS.md.
{
	for p in "$out"/agent-*.cpu.pprof "$out"/restore.cpu.pprof "$out"/line-restore.cpu.pprof "$out"/line-backup.cpu.pprof; do
		[ -f "$p" ] || continue
		echo "== $(basename "$p"): flat"
		go tool pprof -top -nodecount=15 "$out/bin/ompsync-bench" "$p" 2>/dev/null | sed -n '4,25p'
		echo "== $(basename "$p"): cumulative, ompsync code"
		go tool pprof -top -cum -nodecount=25 -focus=ompsync/ompsync -show=ompsync/ompsync "$out/bin/ompsync-bench" "$p" 2>/dev/null | sed -n '6,40p'
	done
	for p in "$out"/agent-*.heap.pprof; do
		[ -f "$p" ] || continue
		for idx in inuse_space alloc_space; do
			echo "== $(basename "$p"): $idx"
			go tool pprof -sample_index=$idx -top -nodecount=15 "$out/bin/ompsync-bench" "$p" 2>/dev/null | sed -n '4,25p'
		done
	done
} >"$out/profiles.txt"
echo
echo "results: $out/results.json; profile summaries: $out/profiles.txt"
