#!/usr/bin/env bash
# deploy/compose/local/run.sh (make compose-demo): `docker compose up demo`
# for real on a Debian 12 machine that reaches the package registries but no
# container registry, as root. It
#   1. installs Debian's docker.io and debootstrap when missing, and builds
#      Docker Compose v2 from the Go module proxy (Debian has only 1.29);
#   2. starts a private dockerd on a socket and data folder of its own
#      (--iptables=false: it touches no firewall rule), stopped by its pid at
#      the end;
#   3. builds a Debian 12 base image (debootstrap --variant=minbase piped into
#      docker import) and from it the stand-ins of override.yml, each only
#      when the hash of its inputs (its label paysuite.inputs) changed;
#   4. builds the suite's images from the real Dockerfile and runs
#        docker compose -f docker-compose.yml -f deploy/compose/local/override.yml \
#          up --exit-code-from demo demo
#   5. then, on the running stack: the compose security of docs/security.md
#      (from a service container the broker's controller port refuses; no
#      service container holds the token signing key), and a kill -9 of the
#      ledger while a second demo run's transfers are in flight, restarted
#      with `up -d`: every transfer still reaches its final status and the
#      balances hold (that demo run's own checks; see kill_scenario);
#   6. `docker compose down -v` and stops dockerd.
# It exits with the demo's exit code (1 if a later check fails).
#
# Caches outlive the run and the checkout, so a fresh clone elsewhere on the
# same machine (CI) finds them warm: PAYSUITE_COMPOSE_CACHE (default
# /var/cache/paysuite-compose) holds the compose plugin (docker-config/),
# the Kafka jars (kafka-jars/) and dockerd's data root (docker/: the images
# and the build cache, with the Dockerfile's Go module and build caches).
# Remove that folder to start cold.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
LOCAL="$ROOT/deploy/compose/local"
CACHE=${PAYSUITE_COMPOSE_CACHE:-/var/cache/paysuite-compose}
RUN_DIR=${PAYSUITE_COMPOSE_RUN:-/run/paysuite-compose}
COMPOSE_VERSION=v2.40.3
KAFKA_VERSION=4.3.1
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

SOCK="$RUN_DIR/docker.sock"
export DOCKER_HOST="unix://$SOCK"
export DOCKER_CONFIG="$CACHE/docker-config"
# The engine is Debian's 20.10: its own CLI talks to it.
DOCKER=/usr/bin/docker
COMPOSE=("$DOCKER" compose -f "$ROOT/docker-compose.yml" -f "$LOCAL/override.yml")
DOCKERD_PID=""
T0=$SECONDS

log() { printf 'compose-demo [%3ds]: %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# ------------------------------------------------------------------ tools

ensure_packages() {
	local missing=()
	command -v dockerd >/dev/null && [ -x "$DOCKER" ] || missing+=(docker.io)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	command -v mvn >/dev/null || missing+=(maven)
	command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
	[ ${#missing[@]} = 0 ] && return 0
	log "installing ${missing[*]} (apt)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ensure_compose builds Compose v2 as a CLI plugin of DOCKER_CONFIG.
# `go install .../cmd@version` refuses the module's exclude directives, so
# the module is downloaded and ./cmd built inside it.
ensure_compose() {
	local plugin="$DOCKER_CONFIG/cli-plugins/docker-compose"
	if [ -x "$plugin" ] && "$DOCKER" compose version --short 2>/dev/null | grep -qx "${COMPOSE_VERSION#v}"; then
		return 0
	fi
	log "building Docker Compose $COMPOSE_VERSION from the Go module proxy (once)"
	local dir
	dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || die "go mod download github.com/docker/compose/v2@$COMPOSE_VERSION gave no directory"
	mkdir -p "$DOCKER_CONFIG/cli-plugins"
	(cd "$dir" && go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
		-o "$plugin.tmp" ./cmd)
	mv -f "$plugin.tmp" "$plugin"
}

# ensure_kafka_jars resolves kafka/pom.xml (the broker as with-infra.sh
# resolves it, plus kafka-tools) once; a stamp holding the POM's hash marks
# the folder complete.
ensure_kafka_jars() {
	local libs="$CACHE/kafka-jars" stamp want tmp
	stamp="$libs/.complete"
	want=$(sha256sum "$LOCAL/kafka/pom.xml" | cut -d' ' -f1)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
	log "resolving the Kafka $KAFKA_VERSION jars from Maven (once)"
	tmp="$libs.tmp.$$"
	rm -rf -- "$tmp"
	mkdir -p "$tmp"
	# shellcheck disable=SC2086 # KAFKA_MVN_ARGS is a word list, as in with-infra.sh
	mvn -q -B -Dstyle.color=never -f "$LOCAL/kafka/pom.xml" ${KAFKA_MVN_ARGS:-} dependency:copy-dependencies \
		-DoutputDirectory="$tmp" -DincludeScope=runtime
	rm -rf -- "$libs"
	mv -- "$tmp" "$libs"
	echo "$want" >"$stamp"
}

# ----------------------------------------------------------------- dockerd

start_dockerd() {
	mkdir -p "$RUN_DIR" "$CACHE/docker"
	local old
	# A dockerd left by a run that was killed: this run holds the lock, so
	# it is nobody's; stop it (only if it is ours: its command line names
	# our data root).
	if old=$(cat "$RUN_DIR/dockerd.pid" 2>/dev/null) && [ -r "/proc/$old/cmdline" ] &&
		tr '\0' ' ' <"/proc/$old/cmdline" | grep -qF -- "--data-root $CACHE/docker"; then
		log "stopping the dockerd left by an earlier run (pid $old)"
		kill -TERM "$old"
		wait_gone "$old" 30 || kill -KILL "$old"
	fi
	rm -f "$SOCK"
	dockerd --data-root "$CACHE/docker" --exec-root "$RUN_DIR/exec" --pidfile "$RUN_DIR/dockerd.pid" \
		--host "$DOCKER_HOST" --iptables=false --ip-masq=false --bridge=none --storage-driver=overlay2 \
		>"$RUN_DIR/dockerd.log" 2>&1 &
	DOCKERD_PID=$!
	local i
	for i in $(seq 1 120); do
		"$DOCKER" version >/dev/null 2>&1 && return 0
		kill -0 "$DOCKERD_PID" 2>/dev/null || break
		sleep 0.5
	done
	tail -n 30 "$RUN_DIR/dockerd.log" >&2
	die "dockerd did not start (log above, $RUN_DIR/dockerd.log)"
}

wait_gone() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

cleanup() {
	local rc=$?
	if [ -n "$DOCKERD_PID" ]; then
		if [ "${COMPOSE_UP:-0}" = 1 ]; then
			log "docker compose down -v"
			"${COMPOSE[@]}" down -v --remove-orphans >/dev/null 2>&1 || log "down -v failed"
		fi
		# The suite's images of earlier runs, untagged by this run's build;
		# the stand-ins and the build cache stay.
		"$DOCKER" image prune -f >/dev/null 2>&1 || true
		log "stopping dockerd (pid $DOCKERD_PID)"
		kill -TERM "$DOCKERD_PID" 2>/dev/null || true
		wait_gone "$DOCKERD_PID" 30 || { log "dockerd ignored SIGTERM for 30s, killing it"; kill -KILL "$DOCKERD_PID" 2>/dev/null || true; }
	fi
	log "exit $rc"
	exit "$rc"
}

# ------------------------------------------------------------------ images

# label_of IMAGE prints the image's paysuite.inputs label, empty if absent.
label_of() { "$DOCKER" image inspect -f '{{index .Config.Labels "paysuite.inputs"}}' "$1" 2>/dev/null || true; }

ensure_base() {
	local image=paysuite-local/debian:bookworm want
	want=$(printf 'debootstrap --variant=minbase bookworm %s v1' "$DEBIAN_MIRROR" | sha256sum | cut -d' ' -f1)
	[ "$(label_of "$image")" = "$want" ] && return 0
	log "debootstrap --variant=minbase bookworm into the base image (once)"
	local rootfs="$CACHE/rootfs.$$"
	rm -rf -- "$rootfs"
	debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed"; }
	rm -rf -- "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
	tar -C "$rootfs" -c . | "$DOCKER" import --change "LABEL paysuite.inputs=$want" --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
	rm -rf -- "$rootfs"
}

# standin NAME IMAGE[,IMAGE...] EXTRA: builds deploy/compose/local/NAME into the
# images (tags) when the hash of its inputs differs from the image's
# paysuite.inputs label: the folder's files, the base image's id, and EXTRA,
# which names what else the build context gets (the Kafka jars' stamp; the
# Go version, GOROOT, CA bundle and proxy settings of the host).
standin() {
	local name=$1 tags=$2 extra=$3 want first ctx
	first=${tags%%,*}
	want=$({
		(cd "$LOCAL/$name" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
		"$DOCKER" image inspect -f '{{.Id}}' paysuite-local/debian:bookworm
		printf '%s\n' "$extra"
	} | sha256sum | cut -d' ' -f1)
	if [ "$(label_of "$first")" = "$want" ]; then
		local t
		for t in ${tags//,/ }; do "$DOCKER" tag "$first" "$t"; done
		return 0
	fi
	log "building the $name stand-in ($tags)"
	ctx="$CACHE/context/$name"
	rm -rf -- "$ctx"
	mkdir -p "$ctx"
	cp -a "$LOCAL/$name/." "$ctx/"
	case $name in
	kafka) cp -a "$CACHE/kafka-jars" "$ctx/libs" && rm -f "$ctx/libs/.complete" ;;
	golang) cp -a "$(go env GOROOT)" "$ctx/go" && cp -L "$CA_BUNDLE" "$ctx/ca-certificates.crt" ;;
	esac
	local args=() t
	for t in ${tags//,/ }; do args+=(-t "$t"); done
	for t in GOPROXY GOSUMDB GOPRIVATE GONOSUMDB; do args+=(--build-arg "$t=$(go env "$t")"); done
	for t in HTTPS_PROXY HTTP_PROXY NO_PROXY; do
		local lower=${t,,}
		args+=(--build-arg "$t=${!t:-${!lower:-}}")
	done
	DOCKER_BUILDKIT=0 "$DOCKER" build -q --network host --label "paysuite.inputs=$want" "${args[@]}" "$ctx" >/dev/null
	rm -rf -- "$ctx"
}

# ------------------------------------------------------------------ checks

# svc_ctr SERVICE prints the id of the service's container.
svc_ctr() { "${COMPOSE[@]}" ps -q "$1"; }

# check_security: what docs/security.md promises of the compose stack, on
# the running containers. Each negative check has a positive control, so
# that a check that cannot succeed does not pass for the wrong reason.
check_security() {
	local probe=gcr.io/distroless/static-debian13:nonroot svc ctr d mounts
	log "security: the controller listener, from each service container's network"
	# The controller listens only on the broker's loopback: from the broker
	# itself it answers, from a service container it refuses; the client
	# listener answers from both.
	"${COMPOSE[@]}" exec -T kafka bash -c 'exec 3<>/dev/tcp/127.0.0.1/9093' ||
		die "the controller listener does not answer on the broker's own loopback"
	for svc in transfers ledger antifraud notifications console; do
		ctr=$(svc_ctr "$svc")
		"$DOCKER" run --rm --network "container:$ctr" --entrypoint bash "$probe" -c 'exec 3<>/dev/tcp/kafka/9092' ||
			die "$svc cannot reach kafka:9092 (the positive control)"
		if "$DOCKER" run --rm --network "container:$ctr" --entrypoint bash "$probe" -c 'exec 3<>/dev/tcp/kafka/9093' 2>/dev/null; then
			die "$svc reaches the broker's controller listener kafka:9093"
		fi
		echo "   $svc: kafka:9092 answers, kafka:9093 refuses"
	done

	log "security: the token signing key, in every volume and secret a service container mounts"
	# The private key's d, read from the volume only auth-keygen and the demo
	# mount, must be in no file mounted into a service container; the
	# public JWKS must be (the positive control).
	d=$("$DOCKER" run --rm -v payments_auth-signing-key:/k:ro --entrypoint cat "$probe" /k/signing-key.jwk |
		sed -n 's/.*"d": *"\([^"]*\)".*/\1/p')
	[ -n "$d" ] || die "could not read the signing key's d from the auth-signing-key volume"
	local x
	x=$("$DOCKER" run --rm -v payments_auth-signing-key:/k:ro --entrypoint cat "$probe" /k/signing-key.jwk |
		sed -n 's/.*"x": *"\([^"]*\)".*/\1/p')
	for svc in kafka-init transfers ledger antifraud notifications console; do
		ctr=$(svc_ctr "$svc")
		[ -n "$ctr" ] || ctr=$("${COMPOSE[@]}" ps -a -q "$svc")
		mounts=$("$DOCKER" inspect -f '{{range .Mounts}}{{.Destination}} {{end}}' "$ctr")
		# shellcheck disable=SC2086 # mounts is a list of paths without spaces
		if "$DOCKER" run --rm --volumes-from "$ctr:ro" --entrypoint grep "$probe" -rqF -- "$d" $mounts 2>/dev/null; then
			die "$svc mounts a file holding the token signing key"
		fi
		if [ "$svc" != kafka-init ]; then
			# shellcheck disable=SC2086
			"$DOCKER" run --rm --volumes-from "$ctr:ro" --entrypoint grep "$probe" -rqF -- "$x" $mounts ||
				die "$svc does not see the public JWKS (the positive control)"
		fi
		if "$DOCKER" cp "$ctr:/home/nonroot/auth/signing-key.jwk" - >/dev/null 2>&1; then
			die "$svc has /home/nonroot/auth/signing-key.jwk"
		fi
		echo "   $svc: mounts ${mounts% }; no file holds the signing key"
	done
}

# kill_scenario: a second demo run with the ledger killed while the run's
# transfers are in flight. So that the kill lands before the ledger decides
# them whatever the machine's speed (a compose command alone can take
# seconds on a busy machine, the flow less than one), antifraud is paused
# (`docker compose pause`, the cgroup freezer) while the run opens its
# accounts and submits its transfers; once the run waits for their
# results, the ledger is killed with SIGKILL, antifraud resumes (its
# analisada records reach a dead ledger), and the ledger starts again
# (`up -d --wait`). The run must still see every transfer reach its
# expected final status and every balance as the script wants, and the
# restarted ledger's log must name the run's transfers.
kill_scenario() {
	local out="$RUN_DIR/demo-kill.out" pid i ctr since
	log "kill -9: a second demo run, the ledger killed while its transfers are in flight"
	ctr=$(svc_ctr ledger)
	"${COMPOSE[@]}" pause antifraud
	"${COMPOSE[@]}" run --rm --no-deps -T demo >"$out" 2>&1 &
	pid=$!
	for i in $(seq 1 1200); do
		grep -q -- '-- waiting for the results' "$out" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	grep -q -- '-- waiting for the results' "$out" || { cat "$out" >&2; die "the second demo run never submitted its transfers"; }
	"${COMPOSE[@]}" kill -s KILL ledger
	since=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	log "ledger killed (SIGKILL) with the run's transfers pending; antifraud resumes, the ledger starts again (up -d --wait)"
	"${COMPOSE[@]}" unpause antifraud
	"${COMPOSE[@]}" up -d --wait ledger
	local rc=0
	wait "$pid" || rc=$?
	cat "$out"
	[ "$rc" = 0 ] || die "after the ledger's kill -9 the demo failed (exit $rc)"
	grep -q '== every expectation held' "$out" || die "the demo after the kill did not report every expectation held"
	local ids after=0 id
	ids=$(sed -n 's/.* \([0-9a-f-]\{36\}\) -> 202 PENDENTE.*/\1/p' "$out")
	for id in $ids; do
		if "$DOCKER" logs --since "$since" "$ctr" 2>&1 | grep -F "$id" | grep -qE 'transfer (settled|rejected|already processed)'; then
			after=$((after + 1))
		fi
	done
	[ "$after" -gt 0 ] || die "the restarted ledger decided none of the run's $(wc -w <<<"$ids") transfers: the kill did not land while they were in flight"
	log "kill -9: $after of the run's $(wc -w <<<"$ids") transfers were decided by the restarted ledger (the rest by antifraud); every one reached its final status, the balances held"
}

# -------------------------------------------------------------------- main

main() {
	[ "$(id -u)" = 0 ] || die "run as root (it installs packages and runs dockerd)"
	mkdir -p "$CACHE" "$RUN_DIR"
	exec 9>"$CACHE/lock"
	flock -w 1800 9 || die "another compose-demo holds $CACHE/lock"
	CA_BUNDLE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}

	ensure_packages
	ensure_compose
	ensure_kafka_jars
	trap cleanup EXIT
	start_dockerd
	log "tools ready; dockerd pid $DOCKERD_PID"

	ensure_base
	standin runtime gcr.io/distroless/static-debian13:nonroot ""
	standin golang golang:1.26 "$(go version) $(go env GOROOT) $(sha256sum <"$CA_BUNDLE") $(go env GOPROXY GOSUMDB GOPRIVATE GONOSUMDB) ${HTTPS_PROXY:-}${https_proxy:-} ${HTTP_PROXY:-}${http_proxy:-} ${NO_PROXY:-}${no_proxy:-}"
	standin postgres paysuite-local/postgres:15 ""
	standin kafka paysuite-local/kafka:4.3.1 "$(cat "$CACHE/kafka-jars/.complete")"
	log "stand-in images ready"

	"${COMPOSE[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
	COMPOSE_UP=1
	log "docker compose build (the real Dockerfile)"
	"${COMPOSE[@]}" build
	log "docker compose up --exit-code-from demo demo"
	local rc=0
	"${COMPOSE[@]}" up --exit-code-from demo demo || rc=$?
	log "the demo exited $rc"
	if [ "$rc" != 0 ]; then
		"${COMPOSE[@]}" ps -a >&2 || true
		"${COMPOSE[@]}" logs --tail 40 >&2 || true
		exit "$rc"
	fi

	log "up -d --wait: the services again, for the checks on the running stack"
	"${COMPOSE[@]}" up -d --wait transfers ledger antifraud notifications console
	check_security
	kill_scenario
	log "every check held"
}

main "$@"
