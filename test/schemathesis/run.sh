#!/usr/bin/env bash
# run.sh: checks that the transfers and ledger services answer what their
# OpenAPI documents say (make schemathesis; CI runs it after make test).
#
# It starts the four services in one process (payments-dev run) against a
# real PostgreSQL and Kafka broker (those of TEST_DATABASE_URL and
# TEST_KAFKA_BROKERS, or throwaway ones from test/infra/with-infra.sh),
# trusting the development signing key under .cache/auth, mints a token
# holding every scope, and runs schemathesis (installed by
# test/infra/ensure-schemathesis.sh) with every check against
# services/transfers/openapi.yaml and services/ledger/openapi.yaml, with
# the per-operation expectations of schemathesis.toml beside this script.
# Any finding fails the run.
#
#   SCHEMATHESIS_MAX_EXAMPLES  test cases per operation and phase (default
#                              150: about 3,700 requests, 1.5 to 2.5 minutes
#                              on a busy 2-core machine)
#   SCHEMATHESIS_SEED          the generator's seed (default 1, so that CI
#                              sends the same requests each run; another
#                              seed explores other ones)
#   SCHEMATHESIS_REPORT_DIR    where the JUnit and NDJSON reports go
#                              (default .cache/schemathesis-report)
#   SCHEMATHESIS_FLAGS         more flags for st run
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

if [ -z "${TEST_DATABASE_URL:-}" ] || [ -z "${TEST_KAFKA_BROKERS:-}" ]; then
	exec bash test/infra/with-infra.sh bash "$ROOT/test/schemathesis/run.sh" "$@"
fi

ST=$(bash test/infra/ensure-schemathesis.sh)
EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-150}
SEED=${SCHEMATHESIS_SEED:-1}
REPORT_DIR=${SCHEMATHESIS_REPORT_DIR:-$ROOT/.cache/schemathesis-report}
GO=${GO:-go}

WORK=$(mktemp -d)
SUITE_PID=""
cleanup() {
	if [ -n "$SUITE_PID" ] && kill -0 "$SUITE_PID" 2>/dev/null; then
		kill -TERM "$SUITE_PID" 2>/dev/null || true
		wait "$SUITE_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf 'schemathesis: %s\n' "$*" >&2; }

"$GO" build -o "$WORK/payments-dev" ./services/suite/cmd/payments-dev
"$GO" build -o "$WORK/payments" ./services/suite/cmd/payments

# Every service on a free loopback port, printed in the runner's Ready
# lines. The per-client rate limit is raised so that the generated requests
# test the API, not the limiter.
DATABASE_URL=$TEST_DATABASE_URL KAFKA_BROKERS=$TEST_KAFKA_BROKERS \
	TRANSFERS_HTTP_ADDR=127.0.0.1:0 LEDGER_HTTP_ADDR=127.0.0.1:0 \
	ANTIFRAUD_HTTP_ADDR=127.0.0.1:0 NOTIFICATIONS_HTTP_ADDR=127.0.0.1:0 \
	CONSOLE_HTTP_ADDR=127.0.0.1:0 \
	RATE_LIMIT_RPS=100000 RATE_LIMIT_BURST=100000 LOG_LEVEL=error \
	"$WORK/payments-dev" run >"$WORK/suite.out" 2>"$WORK/suite.err" &
SUITE_PID=$!

deadline=$((SECONDS + 120))
until grep -q '^Press Ctrl+C' "$WORK/suite.out"; do
	if ! kill -0 "$SUITE_PID" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
		log "the suite did not start:"
		cat "$WORK/suite.out" "$WORK/suite.err" >&2
		exit 1
	fi
	sleep 0.5
done
url_of() { awk -v s="$1" '$1 == s { print $2; exit }' "$WORK/suite.out"; }
TRANSFERS=$(url_of transfers)
LEDGER=$(url_of ledger)
log "transfers at $TRANSFERS, ledger at $LEDGER"

TOKEN=$("$WORK/payments" auth token --client schemathesis --ttl 1h \
	--scopes transferencias:criar,transferencias:ler,transferencias:estornar,contas:admin,contas:depositar,contas:ler,operacoes)

mkdir -p "$REPORT_DIR"
status=0
for spec in transfers:"$TRANSFERS" ledger:"$LEDGER"; do
	name=${spec%%:*} url=${spec#*:}
	log "$name: st run --checks all --max-examples $EXAMPLES --seed $SEED"
	# One worker: with two threads, CPython 3.11's ast.parse (called by
	# hypothesis to describe a strategy) once failed with "AST constructor
	# recursion depth mismatch" (CPython issue 106905), an error of the tool
	# that would fail the run.
	# shellcheck disable=SC2086 # SCHEMATHESIS_FLAGS is a list of flags
	"$ST" --config-file test/schemathesis/schemathesis.toml --no-color \
		run "services/$name/openapi.yaml" --url "$url" \
		-H "Authorization: Bearer $TOKEN" \
		--checks all --max-examples "$EXAMPLES" --seed "$SEED" \
		--workers 1 --request-timeout 10 --generation-database none \
		--report junit,ndjson --report-dir "$REPORT_DIR" \
		--report-junit-path "$REPORT_DIR/$name.xml" --report-ndjson-path "$REPORT_DIR/$name.ndjson" \
		${SCHEMATHESIS_FLAGS:-} || status=1
done
if [ "$status" != 0 ]; then
	log "FAILED: the servers and their OpenAPI documents disagree (seed $SEED; reports in $REPORT_DIR)"
	tail -n 50 "$WORK/suite.err" >&2
fi
exit "$status"
