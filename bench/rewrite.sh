#!/usr/bin/env bash
# Runs the rewrite benchmarks in rounds and prints, for every strategy, its
# median time per key and its ratio to the raw hash of the same bytes:
#   - "bare": the hash alone in a tight loop (BenchmarkFloor)
#   - "append": the hash appended to a reused buffer, the same harness the
#     strategies' append API is measured with (BenchmarkFloorAppend)
# Each round runs every benchmark once (the floors and the kernels one
# after the other, from one test binary), and a ratio is taken within a
# round, so a shared machine's slow minute slows both sides of it; the
# table gives the median of the rounds' ratios and their spread (lowest
# to highest), so two runs of the script can be compared.
# Usage: bash bench/rewrite.sh [rounds]   (default 10)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds="${1:-10}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/rewrite.test" ./rewrite
for r in $(seq "$rounds"); do
	(cd rewrite && "$tmp/rewrite.test" -test.run '^$' -test.bench . -test.benchmem -test.count 1) |
		awk -v r="$r" '/^Benchmark/ { print r, $0 }' | tee -a "$tmp/out" >&2
done
awk -v rounds="$rounds" '
{
	r = $1; name = $2; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	ns[name, r] = $4; all[name] = all[name] " " $4; allocs[name] = $(NF-1); names[name] = 1
}
function median(list,   a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
function lowest(list,   a, n, i, m) { n = split(list, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]; return m }
function highest(list,   a, n, i, m) { n = split(list, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 > m + 0) m = a[i]; return m }
# ratios lists, per round, 100 * floor / kernel.
function ratios(kernel, floor,   r, out) {
	out = ""
	for (r = 1; r <= rounds; r++) if ((kernel, r) in ns && (floor, r) in ns) out = out " " 100 * ns[floor, r] / ns[kernel, r]
	return out
}
END {
	split("HashPrefix/md5/append:md5 HashPrefix/farm/append:farm Shard/farm/append:farm UUID/v5/append:sha1", pairs, " ")
	printf "\n| strategy (append API) | ns/key | M keys/s | allocs/key | vs bare hash: median (spread) | vs hash in same harness: median (spread) |\n|---|---|---|---|---|---|\n"
	for (p = 1; p <= 4; p++) {
		split(pairs[p], kv, ":")
		s = median(all[kv[1]]); bare = ratios(kv[1], "Floor/" kv[2]); app = ratios(kv[1], "FloorAppend/" kv[2])
		printf "| %s | %.1f | %.1f | %s | %.0f%% of %s (%.0f–%.0f%%) | %.0f%% (%.0f–%.0f%%) |\n", kv[1], s, 1000/s, allocs[kv[1]],
			median(bare), kv[2], lowest(bare), highest(bare), median(app), lowest(app), highest(app)
	}
	printf "\n| key-level API | ns/key | M keys/s | allocs/key |\n|---|---|---|---|\n"
	for (n in names) if (n !~ /Floor|append/) printf "| %s | %.1f | %.1f | %s |\n", n, median(all[n]), 1000/median(all[n]), allocs[n]
	printf "\nmedians of %s rounds; a ratio is taken within each round\n", rounds
}' "$tmp/out"
