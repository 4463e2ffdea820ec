#!/usr/bin/env bash
# with-infra.sh CMD [ARGS...]
#
# Runs CMD with a real PostgreSQL and a real Kafka broker, both throwaway, and
# tears them down afterwards. No Docker: PostgreSQL comes from the Debian
# packages, Kafka from the Apache jars on Maven Central.
#
#   TEST_DATABASE_URL   set: use that server, start none.
#                       unset: start a private cluster as the postgres user on
#                       127.0.0.1:${TEST_PG_PORT:-55432} (fsync off: tests only,
#                       unless TEST_PG_OPTS turns it on).
#   TEST_KAFKA_BROKERS  set: use those brokers, start none.
#                       unset: start a single KRaft broker+controller on
#                       127.0.0.1:${TEST_KAFKA_PORT:-19092} (controller on the
#                       next port), jars cached in .cache/kafka/<version>/libs.
#   TEST_PG_OPTS        extra server options of that cluster ("-c name=value ...",
#                       after the defaults, so they override them; make bench-e2e
#                       preloads pg_stat_statements and turns durability on).
#   TEST_KAFKA_JVM_OPTS  JVM flags of that broker (default: 768 MB heap, serial
#                       GC, C1-only JIT for a fast start).
#   TEST_KAFKA_READY_TIMEOUT  seconds to wait for it (default 90).
#
# CMD sees both variables exported. The script exits with CMD's exit code and
# leaves nothing running: the EXIT trap stops Kafka and PostgreSQL and removes
# their temp dirs. Servers left behind by a crashed earlier run are found via
# pid files in ${TMPDIR:-/tmp}/paysuite-test-infra and stopped; ports held by
# anything else make it pick the next free ones.
#
# If the Kafka jars cannot be had (no Maven, no network), it warns LOUDLY and
# runs CMD without TEST_KAFKA_BROKERS: Kafka tests then fail, on purpose.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KAFKA_VERSION=4.3.1
KAFKA_POM="$ROOT/test/infra/kafka/pom.xml"
KAFKA_LIBS="$ROOT/.cache/kafka/$KAFKA_VERSION/libs"
STATE_DIR="${TMPDIR:-/tmp}/paysuite-test-infra"
KAFKA_READY_TIMEOUT=${TEST_KAFKA_READY_TIMEOUT:-90}
# C1-only JIT (TieredStopAtLevel=1) halves the broker's start on a busy 2-CPU
# machine (measured: 13-17 s against 25-38 s) at some cost in peak throughput,
# which tests do not need; `make bench` passes a full-JIT setting instead.
KAFKA_JVM_OPTS=${TEST_KAFKA_JVM_OPTS:--Xmx768m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}

PG_DIR="" PG_BIN="" PG_PID=""
KAFKA_DIR="" KAFKA_PID="" PROBE_BUILD=""
CMD_PID=""
STARTED_PG=0 STARTED_KAFKA=0

log() { printf 'with-infra: %s\n' "$*" >&2; }

loud() {
	{
		printf '\n'
		printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n'
		printf '!!! with-infra WARNING: %s\n' "$@"
		printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n'
	} >&2
}

# as_pg runs a command as the postgres user (PostgreSQL refuses to run as root).
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# port_busy succeeds if something accepts connections on 127.0.0.1:$1.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints the first port from $1 upwards (step $2) such that $1 .. $1+$2-1 are all free.
free_port() {
	local p=$1 span=$2 i busy
	for _ in $(seq 1 200); do
		busy=0
		for ((i = 0; i < span; i++)); do
			if port_busy $((p + i)); then busy=1; break; fi
		done
		if [ "$busy" = 0 ]; then echo "$p"; return 0; fi
		p=$((p + span))
	done
	return 1
}

# mask_url hides a password in a connection URL before it is printed.
mask_url() { sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#' <<<"$1"; }

# wait_gone waits up to $2 seconds for process $1 to exit.
wait_gone() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# stop_pid stops process $1 with signal $2, then SIGKILL after $3 seconds.
stop_pid() {
	local pid=$1 sig=$2 secs=$3
	kill -0 "$pid" 2>/dev/null || return 0
	kill -"$sig" "$pid" 2>/dev/null || true
	if ! wait_gone "$pid" "$secs"; then
		log "pid $pid ignored SIG$sig for ${secs}s, killing it"
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 5 || true
	fi
}

# write_pidfile NAME PID DIR records a server this run owns.
write_pidfile() {
	mkdir -p "$STATE_DIR"
	printf 'owner=%s\npid=%s\ndir=%s\n' "$$" "$2" "$3" >"$STATE_DIR/$1-$$.pid"
}

# reap_stale stops servers whose owning with-infra run is gone (crashed, kill -9).
# A pid is only killed if its command line names the temp dir we recorded, so a
# recycled pid belonging to something else is left alone.
reap_stale() {
	local f owner pid dir k v
	[ -d "$STATE_DIR" ] || return 0
	for f in "$STATE_DIR"/*.pid; do
		[ -e "$f" ] || continue
		owner="" pid="" dir=""
		while IFS='=' read -r k v; do
			case $k in owner) owner=$v ;; pid) pid=$v ;; dir) dir=$v ;; esac
		done <"$f"
		if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
			continue # a live run owns it (running concurrently): not ours to stop
		fi
		if [ -n "$pid" ] && [ -n "$dir" ] && [ -r "/proc/$pid/cmdline" ] &&
			tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"; then
			log "stopping stale server pid $pid left by crashed run $owner ($(basename "$f"))"
			stop_pid "$pid" TERM 15
		fi
		case $dir in "${TMPDIR:-/tmp}"/paysuite-*) rm -rf -- "$dir" ;; esac
		rm -f -- "$f"
	done
}

print_logs() {
	if [ -n "$KAFKA_DIR" ] && [ -f "$KAFKA_DIR/broker.log" ]; then
		log "---- last 60 lines of the Kafka broker log ($KAFKA_DIR/broker.log) ----"
		tail -n 60 "$KAFKA_DIR/broker.log" >&2 || true
	fi
	if [ -n "$PG_DIR" ] && [ -f "$PG_DIR/postgres.log" ]; then
		log "---- last 40 lines of the PostgreSQL log ($PG_DIR/postgres.log) ----"
		tail -n 40 "$PG_DIR/postgres.log" >&2 || true
	fi
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	if [ -n "$CMD_PID" ] && kill -0 "$CMD_PID" 2>/dev/null; then
		kill -TERM -- "-$CMD_PID" 2>/dev/null
		wait_gone "$CMD_PID" 10 || kill -KILL -- "-$CMD_PID" 2>/dev/null
	fi
	if [ "$rc" != 0 ]; then print_logs; fi
	if [ -n "$PROBE_BUILD" ]; then kill "$PROBE_BUILD" 2>/dev/null; wait "$PROBE_BUILD" 2>/dev/null; fi
	if [ -n "$KAFKA_PID" ]; then
		stop_pid "$KAFKA_PID" TERM 30
	fi
	if [ -n "$PG_PID" ]; then
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
			stop_pid "$PG_PID" QUIT 10
	fi
	[ -n "$KAFKA_DIR" ] && rm -rf -- "$KAFKA_DIR"
	[ -n "$PG_DIR" ] && rm -rf -- "$PG_DIR"
	rm -f -- "$STATE_DIR"/*-$$.pid
	if [ "$STARTED_PG$STARTED_KAFKA" != 00 ]; then log "stopped test infrastructure"; fi
	exit "$rc"
}

on_signal() {
	log "caught SIG$1, stopping"
	if [ -n "$CMD_PID" ]; then kill -"$1" -- "-$CMD_PID" 2>/dev/null || true; fi
	case $1 in INT) exit 130 ;; *) exit 143 ;; esac
}

trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

# ---------------------------------------------------------------- PostgreSQL

ensure_postgres_installed() {
	bash "$ROOT/test/infra/ensure-postgres.sh"
}

start_postgres() {
	ensure_postgres_installed
	PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

	PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/paysuite-pg.XXXXXX")
	chmod 700 "$PG_DIR"
	if [ "$(id -u)" = 0 ]; then chown postgres: "$PG_DIR"; fi
	as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres --no-sync \
		--encoding=UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1 ||
		{ cat "$PG_DIR/initdb.log" >&2; return 1; }

	# A port found free can be taken before the server binds it: then try the next.
	local want=${TEST_PG_PORT:-55432} port attempt
	port=$want
	for attempt in 1 2 3 4 5; do
		port=$(free_port "$port" 1) || { log "no free port for PostgreSQL near $want"; return 1; }
		[ "$port" = "$want" ] || log "port $want is taken by something else; PostgreSQL tries $port"
		if as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 60 start -o \
			"-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500 -c shared_buffers=256MB -c wal_level=logical -c max_replication_slots=50 -c max_wal_senders=50 -c max_slot_wal_keep_size=1GB -c wal_sender_timeout=10s ${TEST_PG_OPTS:-}" \
			>/dev/null; then
			break
		fi
		if [ "$attempt" = 5 ] || ! grep -q 'Address already in use' "$PG_DIR/postgres.log"; then
			log "PostgreSQL did not start"
			return 1
		fi
		port=$((port + 1))
	done
	STARTED_PG=1
	PG_PID=$(head -n 1 "$PG_DIR/data/postmaster.pid")
	write_pidfile pg "$PG_PID" "$PG_DIR"

	export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	local version
	version=$("$PG_BIN/psql" "$TEST_DATABASE_URL" -Atc 'SHOW server_version')
	local fsync
	fsync=$("$PG_BIN/psql" "$TEST_DATABASE_URL" -Atc 'SHOW fsync')
	log "PostgreSQL $version (started, $PG_BIN, fsync=$fsync) at $TEST_DATABASE_URL"
}

# --------------------------------------------------------------------- Kafka

# resolve_kafka_jars fills the git-ignored jar cache once; a stamp holding the
# POM's hash marks it complete, so an interrupted download or a POM change is redone.
resolve_kafka_jars() {
	local stamp="$KAFKA_LIBS/.complete" want
	want=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
	if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
		loud "java and/or mvn not found: cannot resolve the Kafka $KAFKA_VERSION broker jars." \
			"Install openjdk-17-jre-headless and maven, or set TEST_KAFKA_BROKERS."
		return 1
	fi
	log "resolving Kafka $KAFKA_VERSION broker jars from Maven into ${KAFKA_LIBS#"$ROOT"/} (once)"
	local tmp="$KAFKA_LIBS.tmp.$$" t0=$SECONDS
	rm -rf -- "$tmp"
	mkdir -p "$tmp"
	# shellcheck disable=SC2086 # KAFKA_MVN_ARGS is a word list on purpose
	if ! mvn -q -B -f "$KAFKA_POM" ${KAFKA_MVN_ARGS:-} dependency:copy-dependencies \
		-DoutputDirectory="$tmp" -DincludeScope=runtime >"$tmp.log" 2>&1; then
		tail -n 30 "$tmp.log" >&2
		rm -rf -- "$tmp" "$tmp.log"
		loud "Maven could not resolve the Kafka $KAFKA_VERSION broker jars (see above)." \
			"NO KAFKA BROKER for this run: Kafka tests will fail. Set TEST_KAFKA_BROKERS to use another broker."
		return 1
	fi
	rm -f -- "$tmp.log"
	rm -rf -- "$KAFKA_LIBS"
	mv -- "$tmp" "$KAFKA_LIBS"
	echo "$want" >"$stamp"
	log "resolved $(find "$KAFKA_LIBS" -name '*.jar' | wc -l) jars in $((SECONDS - t0))s"
}

# cluster_id prints a random KRaft cluster id: 16 random bytes, base64url, as
# StorageTool random-uuid prints them (but without a 2 s JVM start). Ids that
# begin with '-' are skipped, as Kafka does, since they read as CLI flags.
cluster_id() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		case $id in -*) ;; *) echo "$id"; return ;; esac
	done
}

# launch_kafka PORT formats a fresh KRaft store for a broker on PORT and a
# controller on PORT+1, starts the broker and waits for kafkaready. It returns
# 0 when ready, 3 when a port was taken before the broker bound it, 1 otherwise.
launch_kafka() {
	local port=$1 cport=$(($1 + 1)) id
	rm -rf -- "$KAFKA_DIR/data"
	cat >"$KAFKA_DIR/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$KAFKA_DIR/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
	# The cluster id is random per run; --standalone makes this node the
	# single voter of a dynamic quorum (controller.quorum.bootstrap.servers).
	id=$(cluster_id)
	if ! java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool format --standalone -t "$id" \
		-c "$KAFKA_DIR/server.properties" >"$KAFKA_DIR/format.log" 2>&1; then
		cat "$KAFKA_DIR/format.log" >&2
		log "formatting the Kafka storage failed"
		return 1
	fi

	# shellcheck disable=SC2086 # KAFKA_JVM_OPTS is a word list on purpose
	java $KAFKA_JVM_OPTS -Djava.awt.headless=true \
		-Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS \
		-cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_DIR/server.properties" \
		</dev/null >"$KAFKA_DIR/broker.log" 2>&1 &
	KAFKA_PID=$!
	local started=$SECONDS
	STARTED_KAFKA=1
	write_pidfile kafka "$KAFKA_PID" "$KAFKA_DIR"

	if [ -n "$PROBE_BUILD" ]; then
		if ! wait "$PROBE_BUILD"; then
			log "building test/infra/cmd/kafkaready failed"
			return 1
		fi
		PROBE_BUILD=""
	fi
	local deadline=$((SECONDS + KAFKA_READY_TIMEOUT))
	until "$KAFKA_DIR/kafkaready" -brokers "127.0.0.1:$port" -timeout 5s >/dev/null 2>"$KAFKA_DIR/ready.err"; do
		if ! kill -0 "$KAFKA_PID" 2>/dev/null; then
			wait "$KAFKA_PID" 2>/dev/null || true
			KAFKA_PID=""
			if grep -q 'Address already in use' "$KAFKA_DIR/broker.log"; then return 3; fi
			log "the Kafka broker exited during start-up"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			cat "$KAFKA_DIR/ready.err" >&2
			log "the Kafka broker was not ready within ${KAFKA_READY_TIMEOUT}s"
			return 1
		fi
	done
	KAFKA_START_SECS=$((SECONDS - started))
	export TEST_KAFKA_BROKERS="127.0.0.1:$port"
}

start_kafka() {
	resolve_kafka_jars || return 2

	KAFKA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/paysuite-kafka.XXXXXX") || return 1
	local t0=$SECONDS
	# Build the readiness probe while the JVM formats and starts; launch_kafka
	# waits for it.
	(cd "$ROOT" && go build -o "$KAFKA_DIR/kafkaready" ./test/infra/cmd/kafkaready) &
	PROBE_BUILD=$!

	# A port found free can be taken before the broker binds it: then try the next pair.
	local want=${TEST_KAFKA_PORT:-19092} port attempt rc=1
	port=$want
	for attempt in 1 2 3 4 5; do
		port=$(free_port "$port" 2) || { log "no free ports for Kafka near $want"; return 1; }
		[ "$port" = "$want" ] || log "port $want or $((want + 1)) is taken by something else; Kafka tries $port"
		rc=0
		launch_kafka "$port" || rc=$?
		[ "$rc" = 3 ] || break
		log "a Kafka port was taken during start-up (attempt $attempt); retrying on other ports"
		port=$((port + 2))
	done
	[ "$rc" = 0 ] || return 1
	local version
	version=$(grep -m 1 -o 'Kafka version: [^ ]*' "$KAFKA_DIR/broker.log" | cut -d' ' -f3)
	log "Kafka ${version:-$KAFKA_VERSION?} (started, KRaft single node, jars ${KAFKA_LIBS#"$ROOT"/}) at $TEST_KAFKA_BROKERS, ready in $((SECONDS - t0))s (broker start ${KAFKA_START_SECS}s)"
}

# ---------------------------------------------------------------------- main

if [ $# -eq 0 ]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

reap_stale

if [ -n "${TEST_DATABASE_URL:-}" ]; then
	log "PostgreSQL: using TEST_DATABASE_URL=$(mask_url "$TEST_DATABASE_URL") (not started here)"
else
	start_postgres
fi

if [ -n "${TEST_KAFKA_BROKERS:-}" ]; then
	log "Kafka: using TEST_KAFKA_BROKERS=$TEST_KAFKA_BROKERS (not started here)"
else
	kafka_rc=0
	start_kafka || kafka_rc=$?
	if [ "$kafka_rc" = 2 ]; then
		log "Kafka: NONE (TEST_KAFKA_BROKERS unset; Kafka tests will fail)"
	elif [ "$kafka_rc" != 0 ]; then
		exit "$kafka_rc"
	fi
fi

# promtool runs the alert rules' unit tests (deploy/deploytest); a missing
# one fails them loudly.
"$ROOT/test/infra/ensure-promtool.sh" || log "promtool: NONE (the alert rule tests will fail)"

# CMD runs in its own process group (set -m) so that a signal to this script
# can be passed on to CMD and everything it started (go test's test binaries).
set -m
"$@" &
CMD_PID=$!
set +m
rc=0
wait "$CMD_PID" || rc=$?
CMD_PID=""
if [ "$rc" != 0 ]; then log "command exited with status $rc"; fi
exit "$rc"
