#!/usr/bin/env bash
# The operator guide's worked example of a staged migration
# (docs/operator-guide.md, "The worked example"), run as written against the Firestore emulator in
# Datastore mode: an application reads, writes and deletes users' logs
# through the cutover library the whole time, while the cohorts go, 1%,
# then 10%, 50% and the rest, from old through dual_write, a backfill,
# repair and verify, shadow, read_new and new_only to done, and the old
# records are cleaned up. It fails if any step fails or if the
# application ever read a value that was not the latest it wrote.
#
#   DATASTORE_EMULATOR_HOST=localhost:8081 bash examples/staged/run.sh
#
# (scripts/test.sh starts the emulator; examples/staged's Go test runs
# this script.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${DATASTORE_EMULATOR_HOST:?the Firestore emulator in Datastore mode must be running (DATASTORE_EMULATOR_HOST)}"

work=$(mktemp -d)
app=""
cleanup() {
	[[ -n "$app" ]] && kill "$app" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/rekey" ./cmd/rekey
go build -o "$work/app" ./examples/staged/app
rekey() { "$work/rekey" "$@"; }
step() { printf '\n== %s\n' "$*"; }

# Fresh namespaces and migration name for this run; everything else is
# the config's.
run=$$-$RANDOM
export REKEY_SOURCE_NAMESPACE="logs-$run" REKEY_TARGET_NAMESPACE="logs-v2-$run" REKEY_DEAD_LETTER="$work/dead.jsonl"
C=examples/staged/migration.yaml
M="logs-v2-$run"
HOLD=4 # cohort.cache_ttl + cohort.skew, and a second more

step "prepare the target and the phase store (before the application is deployed)"
rekey cohort prepare -c "$C" --migration "$M"

step "the application writes its users' logs (every cohort is old: old keys only)"
"$work/app" -c "$C" -migration "$M" -namespace "$REKEY_SOURCE_NAMESPACE" -users 300 -seed
"$work/app" -c "$C" -migration "$M" -namespace "$REKEY_SOURCE_NAMESPACE" -users 300 >"$work/app.json" &
app=$!
sleep 2

for cohorts in 0-99 100-999 1000-4999 5000-9999; do
	step "cohorts $cohorts: dual_write (the application writes old, then new)"
	rekey cohort advance -c "$C" --migration "$M" --cohorts "$cohorts" --to dual_write --why "start $cohorts"
	sleep "$HOLD"

	step "cohorts $cohorts: backfill (copies what the application has not touched since dual_write began; then backfilled)"
	rekey run -c "$C" --migration "$M" --cohorts "$cohorts"

	step "cohorts $cohorts: repair, then verify --mark (clean: verified)"
	rekey repair -c "$C" --migration "$M" --cohorts "$cohorts" --report "$work/repair.jsonl"
	rekey verify -c "$C" --migration "$M" --cohorts "$cohorts" --report "$work/verify.jsonl" --mark

	step "cohorts $cohorts: shadow (reads both, returns old, compares), then read_new (new is authoritative)"
	rekey cohort advance -c "$C" --migration "$M" --cohorts "$cohorts" --to shadow
	sleep 1
	rekey cohort advance -c "$C" --migration "$M" --cohorts "$cohorts" --to read_new
	sleep "$HOLD"

	step "cohorts $cohorts: repair what new missed while old was authoritative, then new_only, then done"
	rekey repair -c "$C" --migration "$M" --cohorts "$cohorts" --report "$work/repair.jsonl"
	rekey cohort advance -c "$C" --migration "$M" --cohorts "$cohorts" --to new_only
	sleep "$HOLD"
	rekey cohort advance -c "$C" --migration "$M" --cohorts "$cohorts" --to done
done

step "every cohort is done: clean up the old records"
rekey cohort cleanup -c "$C" --migration "$M" --cohorts 0-9999
rekey cohort status -c "$C" --migration "$M"
rekey cohort log -c "$C" --migration "$M" | tail -n 5

step "the application's own account (every read the latest write it made)"
kill -TERM "$app"
status=0
wait "$app" || status=$?
app=""
cat "$work/app.json"
if [[ $status -ne 0 ]]; then
	echo "examples/staged: the application saw a wrong read or a call that never succeeded" >&2
	exit 1
fi
echo "examples/staged: done"
