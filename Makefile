# Developer and CI entry points. CI (.ci/run) runs `make lint` then `make test`.
#
#   make test    all tests, race detector on, against a throwaway PostgreSQL and
#                Kafka that test/infra/with-infra.sh starts and stops (or the
#                servers in TEST_DATABASE_URL / TEST_KAFKA_BROKERS, if set)
#   make lint    gofmt, go mod tidy -diff, go vet, golangci-lint (pinned in
#                go.mod's tool block)
#   make bench   benchmarks against the same throwaway servers:
#                make bench BENCH=Relay BENCHTIME=5s PKGS=./pkg/outbox/...
#   make bench-e2e  the whole flow under open-loop load (test/benche2e) on a durable
#                PostgreSQL, each relay in turn, all
#                in one process and as four processes, on the same servers:
#                make bench-e2e BENCH_E2E_FLAGS='-rates 100,300,600 -step 60s'
#   make demo    the whole suite in one process, a scripted flow, then it serves
#   make run     the same without the script
#   make chaos   the fault test of issue 14 (test/chaos, build tag chaos): the
#                four services as OS processes over a PostgreSQL (fsync on) and
#                a Kafka broker it starts itself, kill -9s, restarts, outages,
#                poison, a real Prometheus; prints a table of figures.
#                make chaos CHAOS_FLAGS='-chaos.dbstop=15s' shortens the outage
#                make chaos CHAOS_FLAGS='-chaos.relay=logical' runs every service
#                on the logical relay (OUTBOX_RELAY); the default is polling
#   make debezium  Debezium's PostgreSQL connector and outbox event router,
#                configured as deploy/README.md documents, in a Kafka Connect
#                standalone worker (jars of test/infra/debezium/pom.xml, cached
#                in .cache/debezium): the suite's consumers take its records as
#                the relays' (test/debezium, build tag debezium)
#   make bench-debezium  Debezium beside the polling and the logical relay,
#                same servers, same run: events/s and enqueue-to-topic p99
#                make bench-debezium DEBEZIUM_BENCHTIME=50000x
#   make schemathesis  the transfers and ledger services (payments-dev run)
#                against a throwaway PostgreSQL and Kafka, checked by
#                schemathesis (--checks all, PyPI, in a venv under .cache)
#                against their OpenAPI documents: test/schemathesis/run.sh
#   make test-cluster  the replicated servers' own tests (test/cluster, build
#                tag cluster): three KRaft nodes (leader and controller kills,
#                a hung node, writes refused below min ISR) and PostgreSQL
#                primary/standby pairs (failover, a stopped synchronous standby,
#                the asynchronous loss, fencing a revived primary)
#   make chaos-cluster  the failover scenarios under load (test/chaos,
#                TestChaosCluster): the four services over three KRaft nodes and
#                two PostgreSQL primary/standby pairs, leader, controller and
#                two-broker kills, a hung broker, kill -9 and SIGSTOP of each
#                primary with promotion and fencing, a stopped synchronous
#                standby; the history checker must find no anomaly.
#                CHAOS_FLAGS='-chaos.replication=async' must find the loss;
#                CHAOS_FLAGS='-chaos.cluster-reduced' is the shorter CI form
#   make compose-demo  `docker compose up demo` for real where no container
#                registry is reachable (Debian 12, root): installs docker.io and
#                debootstrap if missing, builds Compose v2 from the Go module
#                proxy, a private dockerd (stopped at the end), stand-in images
#                for PostgreSQL, Kafka and the Dockerfile's bases
#                (deploy/compose/local/), the suite's images from the real
#                Dockerfile; runs the demo, checks the compose security on the
#                running stack and a kill -9 of the ledger mid-flow, then
#                `down -v`. Exit code: the demo's. Caches outlive the checkout
#                in PAYSUITE_COMPOSE_CACHE (default /var/cache/paysuite-compose)
#   make vuln    govulncheck; needs vuln.go.dev, so not part of CI
#
# The throwaway PostgreSQL of make test and make bench runs with fsync=off,
# synchronous_commit=off and full_page_writes=off; make bench-e2e turns all
# three on (BENCH_E2E_DURABLE).

SHELL := bash
GO ?= go
PKGS ?= ./...
BENCH ?= .
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
# Benchmarks get the broker with its full JIT (tests start it C1-only, faster).
BENCH_KAFKA_JVM_OPTS ?= -Xmx1g
WITH_INFRA := bash test/infra/with-infra.sh

.PHONY: test lint bench bench-e2e demo run vuln chaos chaos-cluster schemathesis test-cluster debezium bench-debezium compose-demo

test:
	bash test/infra/ensure-chromium.sh
	$(WITH_INFRA) $(GO) test -race -count=1 -timeout 40m $(PKGS)

lint:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	@# go.mod and go.sum must be what `go mod tidy` writes: prints the diff and fails otherwise.
	$(GO) mod tidy -diff
	$(GO) vet $(PKGS)
	@# No Kafka client outside pkg/broker (pkg/broker/imports_test.go).
	$(GO) test -count=1 -run 'TestNoKafkaClientOutsideBroker|TestClientImportsFindsAnImport' ./pkg/broker/
	$(GO) tool golangci-lint run --allow-serial-runners $(PKGS)
	bash test/infra/ensure-promtool.sh
	promtool check rules deploy/prometheus/alerts.yml
	promtool check config deploy/prometheus/prometheus.yml

bench:
	TEST_KAFKA_JVM_OPTS='$(BENCH_KAFKA_JVM_OPTS)' $(WITH_INFRA) $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -benchmem -timeout 60m $(PKGS)

# Not part of CI. It drops and creates the databases payments_<service> and
# the suite's default topics on the servers it is given: with-infra's own,
# on a data folder of its own. PostgreSQL is durable, as deploy/ runs it
# (fsync, synchronous_commit, full_page_writes on); BENCH_E2E_DURABLE=0
# measures on with-infra's test settings (all three off) instead.
# pg_stat_statements is loaded; the bench turns its tracking off unless
# -profile asks for it. Both relays are measured, each beside its own
# baselines (-relay polling,logical).
BENCH_E2E_FLAGS ?=
BENCH_E2E_DURABLE ?= 1
BENCH_E2E_PG_OPTS ?= -c shared_preload_libraries=pg_stat_statements $(if $(filter 0,$(BENCH_E2E_DURABLE)),,-c fsync=on -c synchronous_commit=on -c full_page_writes=on)
bench-e2e:
	TEST_PG_OPTS='$(BENCH_E2E_PG_OPTS)' TEST_KAFKA_JVM_OPTS='$(BENCH_KAFKA_JVM_OPTS)' $(WITH_INFRA) $(GO) run ./test/benche2e $(BENCH_E2E_FLAGS)

# The four services in one process on the default ports (8080-8083), by the
# development runner payments-dev (not in the production image): a local
# PostgreSQL found or started by deploy/local/postgres.sh (or DATABASE_URL),
# and franz-go's kfake, an in-process fake Kafka (or KAFKA_BROKERS).
# demo adds the scripted flow and its results; both serve until Ctrl+C.
# Unless AUTH_JWKS_URL or AUTH_JWKS_FILE is set, both make a development token
# signing key under .cache/auth/ when there is none and configure the four
# services with it: `go run ./services/suite/cmd/payments auth token --client
# NAME --scopes S1,S2` then prints a token for them. Likewise, unless
# TRANSFERS_AUTHORIZATION_KEY_FILE or LEDGER_AUTHORIZATION_JWKS_FILE is set,
# they make the transfers service's transfer authorization key there and give
# the ledger its public JWKS.
demo run:
	@url=$$(bash deploy/local/postgres.sh) && DATABASE_URL="$$url" $(GO) run ./services/suite/cmd/payments-dev $@

# Needs java and the Kafka jars (resolved like with-infra.sh does, into
# .cache/kafka), PostgreSQL's server binaries and Debian's prometheus package.
CHAOS_FLAGS ?=
chaos:
	bash test/infra/ensure-promtool.sh
	bash test/infra/ensure-postgres.sh
	$(GO) test -tags chaos -count=1 -timeout 30m -v -run '^TestChaos$$' ./test/chaos/ $(CHAOS_FLAGS)

# Not part of CI: each run starts a Kafka Connect worker (a JVM) beside the
# broker. DEBEZIUM_FLAGS passes the test's flags (-debezium.rest-port=N,
# -debezium.jvm='...').
DEBEZIUM_FLAGS ?=
DEBEZIUM_BENCHTIME ?= 20000x
debezium:
	bash test/infra/debezium/resolve.sh >/dev/null
	$(WITH_INFRA) $(GO) test -tags debezium -count=1 -timeout 20m -v -run '^TestDebezium' ./test/debezium/ $(DEBEZIUM_FLAGS)

bench-debezium:
	bash test/infra/debezium/resolve.sh >/dev/null
	TEST_KAFKA_JVM_OPTS='$(BENCH_KAFKA_JVM_OPTS)' $(WITH_INFRA) $(GO) test -tags debezium -count=1 -timeout 60m -run '^$$' -bench 'Debezium' -benchtime $(DEBEZIUM_BENCHTIME) ./test/debezium/ $(DEBEZIUM_FLAGS)

# The same needs as chaos (the Kafka jars resolve as make test's do).
chaos-cluster:
	bash test/infra/ensure-promtool.sh
	bash test/infra/ensure-postgres.sh
	$(GO) test -tags chaos -count=1 -timeout 45m -v -run '^TestChaosCluster$$' ./test/chaos/ $(CHAOS_FLAGS)

# SCHEMATHESIS_MAX_EXAMPLES and SCHEMATHESIS_SEED are read by the script.
schemathesis:
	bash test/schemathesis/run.sh

# Needs java and the Kafka jars (as chaos) and PostgreSQL's server binaries.
test-cluster:
	bash test/infra/ensure-postgres.sh
	$(GO) test -tags cluster -count=1 -timeout 20m -v ./test/cluster/

# deploy/compose/local/run.sh says what it installs, starts and caches.
compose-demo:
	bash deploy/compose/local/run.sh

vuln:
	$(GO) tool govulncheck $(PKGS)
