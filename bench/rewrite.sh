#!/usr/bin/env bash
# Runs the rewrite benchmarks once (go test -bench, -count runs each) and
# prints, for every strategy, its median throughput and its ratio to the
# raw hash of the same bytes measured in the same run:
#   - "bare": the hash alone in a tight loop (BenchmarkFloor)
#   - "append": the hash appended to a reused buffer, the same harness the
#     strategies' append API is measured with (BenchmarkFloorAppend)
# Usage: bash bench/rewrite.sh [count]   (default 10)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
count="${1:-10}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
go test ./rewrite -run '^$' -bench . -benchmem -count "$count" | tee "$out" >&2
awk -v count="$count" '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	ns[name] = ns[name] " " $3; allocs[name] = $(NF-1)
}
function median(list,   a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
END {
	split("HashPrefix/md5/append:md5 HashPrefix/farm/append:farm Shard/farm/append:farm UUID/v5/append:sha1", pairs, " ")
	printf "\n| strategy (append API) | ns/key | M keys/s | allocs/key | vs bare hash | vs hash in same harness |\n|---|---|---|---|---|---|\n"
	for (p in pairs) {
		split(pairs[p], kv, ":")
		s = median(ns[kv[1]]); bare = median(ns["Floor/" kv[2]]); app = median(ns["FloorAppend/" kv[2]])
		printf "| %s | %.1f | %.1f | %s | %.0f%% of %s (%.1f ns) | %.0f%% (%.1f ns) |\n", kv[1], s, 1000/s, allocs[kv[1]], 100*bare/s, kv[2], bare, 100*app/s, app
	}
	printf "\n| key-level API | ns/key | M keys/s | allocs/key |\n|---|---|---|---|\n"
	for (n in ns) if (n !~ /Floor|append/) printf "| %s | %.1f | %.1f | %s |\n", n, median(ns[n]), 1000/median(ns[n]), allocs[n]
	printf "\nmedians of %s runs\n", count
}' "$out"
