#!/usr/bin/env bash
# Runs `go test ./... "$@"` against local Google emulators and a Beam job
# server (the integration package after the others, by itself: see below).
#
# Starts the Cloud Spanner emulator and the Firestore emulator in Datastore
# mode on two free loopback ports, exports SPANNER_EMULATOR_HOST,
# DATASTORE_EMULATOR_HOST and the project variables the clients and
# internal/store/emulator read; builds prism (Beam's portable runner, the Beam
# version of go.mod) and starts it as a standalone job server on a third
# port, the way Flink and Spark job servers run, for the tests of the
# universal runner (REKEY_JOB_ENDPOINT=localhost:PORT, read by
# internal/testkit/beamtest), and a Go SDK worker pool beside it for tests whose
# workers run in processes of their own (REKEY_WORKER_POOL); runs the tests, stops everything it started (even
# when the tests fail or the script is interrupted) and exits with go
# test's status.
#
# If SPANNER_EMULATOR_HOST and DATASTORE_EMULATOR_HOST are both set already,
# those emulators are reused and nothing is started; if only one is set,
# only the other emulator is started. Likewise a job server at
# REKEY_JOB_ENDPOINT (host:port) is reused.
#
# The emulators come with the machine image (google-cloud-sdk components
# cloud-spanner-emulator and cloud-firestore-emulator, the latter needs Java
# 17+); they cannot be installed from package registries. Override their
# paths with SPANNER_EMULATOR_BIN and FIRESTORE_EMULATOR_BIN.
#
# Examples:
#   bash scripts/test.sh
#   bash scripts/test.sh -count=1 -run 'Equality|Emulator' ./integration/... ./internal/...
#
# Extra arguments go to `go test` after "./...". To test only some packages,
# pass them: a package list anywhere in the arguments replaces "./...".
set -euo pipefail

SPANNER_EMULATOR_BIN="${SPANNER_EMULATOR_BIN:-/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/emulator_main}"
FIRESTORE_EMULATOR_BIN="${FIRESTORE_EMULATOR_BIN:-/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud_firestore_emulator}"
# Seconds to wait for each emulator to answer.
EMULATOR_START_TIMEOUT="${EMULATOR_START_TIMEOUT:-60}"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 2
}

LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/rekey-test.XXXXXX")"
# Binaries built for the run (prism), removed at the end.
BIN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/rekey-test-bin.XXXXXX")"
# The run's start, for the worker binaries Beam's boot copied meanwhile.
START_MARK="$(mktemp "${TMPDIR:-/tmp}/rekey-test-start.XXXXXX")"
PIDS=()
KEEP_LOGS=0

# stop_group kills an emulator's whole process group (the Firestore
# emulator's launcher script runs java as a child), politely first.
stop_group() {
	local pid="$1" i
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 50); do
		kill -0 -- "-$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || true
}

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	local pid
	for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
		stop_group "$pid"
	done
	for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$BIN_DIR"
	# Beam's boot copies the worker binary into /tmp/binNNN/worker (about
	# 150 MB) and never removes it; the worker pool removes those it
	# finds, and those it missed that this run made go here.
	find /tmp -maxdepth 1 -type d -regex '/tmp/bin[0-9]+' -newer "$START_MARK" 2>/dev/null | while read -r d; do
		if [[ "$(ls -A "$d" 2>/dev/null)" == "worker" || -z "$(ls -A "$d" 2>/dev/null)" ]]; then
			rm -rf "$d"
		fi
	done || true
	rm -f "$START_MARK"
	if [[ -z "$(ls -A "$LOG_DIR" 2>/dev/null)" ]]; then
		rm -rf "$LOG_DIR"
	elif [[ $status -ne 0 || $KEEP_LOGS -ne 0 ]]; then
		log "emulator and job server logs kept in $LOG_DIR"
	else
		rm -rf "$LOG_DIR"
	fi
	exit "$status"
}
# go test runs in its own process group so that an interrupt stops it (and
# its test binaries) at once instead of after the tests finish.
GO_PID=
on_signal() {
	if [[ -n "$GO_PID" ]]; then
		log "interrupted; stopping go test"
		stop_group "$GO_PID"
	fi
	exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# port_free reports whether nothing listens on 127.0.0.1:$1.
port_free() {
	if command -v ss >/dev/null 2>&1; then
		! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
	else
		! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# free_port prints a port that is free now and not among the arguments.
# Ports come from 20000-32767, below Linux's ephemeral range, so outgoing
# connections cannot take them meanwhile.
free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 12768))
		[[ " $* " == *" $p "* ]] && continue
		if port_free "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "found no free loopback port"
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

http_ok() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$1/" 2>/dev/null
	else
		local reply
		reply="$(exec 3<>"/dev/tcp/127.0.0.1/$1" &&
			printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
			timeout 2 head -n1 <&3)" 2>/dev/null || return 1
		[[ "$reply" == *" 200 "* ]]
	fi
}

# start NAME LOGFILE READY_CHECK PORT CMD... starts CMD in its own process
# group and waits until READY_CHECK PORT succeeds. Returns 1 if the process
# exits first (e.g. the port was taken meanwhile), exits on a timeout.
STARTED_PID=
start() {
	local name="$1" logf="$2" check="$3" port="$4"
	shift 4
	log "starting $name on 127.0.0.1:$port (log: $logf)"
	setsid "$@" >"$logf" 2>&1 </dev/null &
	STARTED_PID=$!
	PIDS+=("$STARTED_PID")
	local deadline=$((SECONDS + EMULATOR_START_TIMEOUT))
	until "$check" "$port"; do
		if ! kill -0 "$STARTED_PID" 2>/dev/null; then
			log "$name exited before answering on port $port; last lines of $logf:"
			tail -n 20 "$logf" >&2 || true
			return 1
		fi
		if ((SECONDS >= deadline)); then
			KEEP_LOGS=1
			log "$name did not answer on 127.0.0.1:$port within ${EMULATOR_START_TIMEOUT}s; last lines of $logf:"
			tail -n 20 "$logf" >&2 || true
			die "$name failed to start"
		fi
		sleep 0.1
	done
	log "$name ready on 127.0.0.1:$port"
}

# start_retry tries start on up to 3 fresh ports; sets PORT.
PORT=
start_retry() {
	local name="$1" check="$2" mkcmd="$3" attempt
	for attempt in 1 2 3; do
		PORT="$(free_port "${USED_PORTS[@]+"${USED_PORTS[@]}"}")"
		USED_PORTS+=("$PORT")
		"$mkcmd" "$PORT"
		if start "$name" "$LOG_DIR/$name.$attempt.log" "$check" "$PORT" "${CMD[@]}"; then
			return 0
		fi
		stop_group "$STARTED_PID"
	done
	KEEP_LOGS=1
	die "$name failed to start 3 times; logs in $LOG_DIR"
}

require_bin() {
	local bin="$1" env="$2" component="$3"
	if [[ ! -x "$bin" ]]; then
		die "$bin not found or not executable. It comes with the machine image (google-cloud-sdk component '$component', e.g. the google-cloud-cli-${component} package or 'gcloud components install $component'); it cannot be installed from the package registries here. Set $env to its path if it is installed elsewhere."
	fi
}

USED_PORTS=()
CMD=()
spanner_cmd() { CMD=("$SPANNER_EMULATOR_BIN" "--host_port=127.0.0.1:$1"); }
firestore_cmd() {
	CMD=("$FIRESTORE_EMULATOR_BIN" start --host=127.0.0.1 "--port=$1" --database-mode=datastore-mode)
}
prism_cmd() { CMD=("$BIN_DIR/prism" "-job_port=$1" -serve_http=false); }
workerpool_cmd() { CMD=("$BIN_DIR/workerpool" "-port=$1" "-boot=$BIN_DIR/boot" "-root=$REKEY_WORKER_POOL_DIR"); }

if [[ -n "${SPANNER_EMULATOR_HOST:-}" ]]; then
	log "reusing the Spanner emulator at SPANNER_EMULATOR_HOST=$SPANNER_EMULATOR_HOST"
else
	require_bin "$SPANNER_EMULATOR_BIN" SPANNER_EMULATOR_BIN cloud-spanner-emulator
	start_retry spanner-emulator tcp_open spanner_cmd
	export SPANNER_EMULATOR_HOST="127.0.0.1:$PORT"
fi

if [[ -n "${DATASTORE_EMULATOR_HOST:-}" ]]; then
	log "reusing the Datastore emulator at DATASTORE_EMULATOR_HOST=$DATASTORE_EMULATOR_HOST"
else
	require_bin "$FIRESTORE_EMULATOR_BIN" FIRESTORE_EMULATOR_BIN cloud-firestore-emulator
	if ! command -v "${JAVA:-java}" >/dev/null 2>&1; then
		die "the Firestore emulator needs Java 17 or newer ('${JAVA:-java}' not found on PATH; set JAVA to a java binary)"
	fi
	start_retry firestore-emulator http_ok firestore_cmd
	export DATASTORE_EMULATOR_HOST="127.0.0.1:$PORT"
fi

if [[ -n "${REKEY_JOB_ENDPOINT:-}" ]]; then
	log "reusing the Beam job server at REKEY_JOB_ENDPOINT=$REKEY_JOB_ENDPOINT"
else
	log "building prism (the Beam job server)"
	go build -o "$BIN_DIR/prism" github.com/apache/beam/sdks/v2/go/cmd/prism || die "building prism failed"
	start_retry prism-job-server tcp_open prism_cmd
	export REKEY_JOB_ENDPOINT="localhost:$PORT"
fi

export DATASTORE_PROJECT_ID="${DATASTORE_PROJECT_ID:-rekey-test}"
export SPANNER_PROJECT_ID="${SPANNER_PROJECT_ID:-rekey-test}"
export SPANNER_INSTANCE_ID="${SPANNER_INSTANCE_ID:-rekey-test}"

# A Go SDK worker pool beside the job server, for the tests that run jobs
# with their workers in other processes (--environment_type EXTERNAL), as
# Flink, Spark and Dataflow do: Beam's boot program (sdks/go/container)
# starts each worker from the binary the job staged, in a folder and
# TMPDIR of its own under REKEY_WORKER_POOL_DIR (internal/testkit/workerpool),
# with the environment above (the emulators' addresses and projects).
if [[ -n "${REKEY_WORKER_POOL:-}" ]]; then
	log "reusing the Go SDK worker pool at REKEY_WORKER_POOL=$REKEY_WORKER_POOL"
else
	log "building Beam's Go SDK boot program and the worker pool"
	go build -o "$BIN_DIR/boot" github.com/apache/beam/sdks/v2/go/container || die "building Beam's boot program failed"
	go build -o "$BIN_DIR/workerpool" ./internal/testkit/workerpool || die "building the worker pool failed"
	export REKEY_WORKER_POOL_DIR="$LOG_DIR/workers"
	start_retry worker-pool tcp_open workerpool_cmd
	export REKEY_WORKER_POOL="localhost:$PORT"
	# Tests whose workers must see what this pool's do not (a commit tap
	# in front of an emulator) start a pool of their own from these.
	export REKEY_WORKER_POOL_BIN="$BIN_DIR/workerpool" REKEY_WORKER_BOOT="$BIN_DIR/boot"
fi

# Packages: "./..." unless the arguments name some: a pattern ending in
# "/...", a directory, or an import path of this module.
pkgs=(./...)
for a in "$@"; do
	case "$a" in
	-*) continue ;;
	*/... | github.com/rekeyio/rekey | github.com/rekeyio/rekey/*) ;;
	*) [[ -d "$a" && "$a" == .* ]] || continue ;;
	esac
	pkgs=()
	break
done

# The integration package runs alone (-p 1): its ramp-up and interrupt
# tests measure time against the emulators, and other test binaries
# sharing the cores skew those measurements (a ramp-up second once got 350
# rows against 300 so). With the default packages (./...) and no -p in the
# arguments, the other packages run first, two at a time (-p 2: none
# measures time against a store), then the integration package by
# itself; with packages named, they run one at a time unless the
# arguments say.
par=(-p 1)
for a in "$@"; do
	case "$a" in -p | -p=*) par=() ;; esac
done
integration=github.com/rekeyio/rekey/integration
split=0
if [[ ${#pkgs[@]} -eq 1 && "${pkgs[0]}" == ./... && ${#par[@]} -gt 0 ]]; then
	split=1
fi

# The integration package runs the cutover soaks and the staged
# end-to-end test in seven shapes, on prism and on the worker pool: about
# 30 minutes on a 2-core machine (35 with -full, which adds a soak seed
# and worker-pool shapes), so its limit is well past go test's
# default 10 minutes per package (a hang still ends it), unless the
# arguments say.
tmo=(-timeout=55m)
for a in "$@"; do
	case "$a" in -timeout | -timeout=*) tmo=() ;; esac
done

# run_go_test runs go test with its arguments in a process group of its
# own (GO_PID, which an interrupt stops) and returns its status.
run_go_test() {
	log "go test $*"
	setsid go test "$@" &
	GO_PID=$!
	set +e
	wait "$GO_PID"
	local st=$?
	set -e
	GO_PID=
	return "$st"
}

status=0
if [[ $split -eq 1 ]]; then
	mapfile -t others < <(go list ./... | grep -vx "$integration")
	run_go_test -p 2 "${tmo[@]+"${tmo[@]}"}" "${others[@]}" "$@" || status=$?
	run_go_test -p 1 "${tmo[@]+"${tmo[@]}"}" ./integration/ "$@" || {
		st=$?
		[[ $status -ne 0 ]] || status=$st
	}
else
	run_go_test "${par[@]+"${par[@]}"}" "${tmo[@]+"${tmo[@]}"}" "${pkgs[@]+"${pkgs[@]}"}" "$@" || status=$?
fi
if [[ $status -ne 0 ]]; then
	log "go test failed with status $status"
fi
exit "$status"
