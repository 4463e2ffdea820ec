# Developer and CI entry points. CI (.ci/run) runs `make lint` then `make test`.
#
#   make test    all tests, race detector on, against a throwaway PostgreSQL and
#                Kafka that test/infra/with-infra.sh starts and stops (or the
#                servers in TEST_DATABASE_URL / TEST_KAFKA_BROKERS, if set)
#   make lint    gofmt, go vet, golangci-lint (pinned in go.mod's tool block)
#   make bench   benchmarks against the same throwaway servers:
#                make bench BENCH=Relay BENCHTIME=5s PKGS=./pkg/outbox/...
#   make vuln    govulncheck; needs vuln.go.dev, so not part of CI
#
# The throwaway PostgreSQL runs with fsync=off, synchronous_commit=off and
# full_page_writes=off: benchmark numbers measure code, not durable commits.

SHELL := bash
GO ?= go
PKGS ?= ./...
BENCH ?= .
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
WITH_INFRA := bash test/infra/with-infra.sh

.PHONY: test lint bench demo run vuln

test:
	$(WITH_INFRA) $(GO) test -race -count=1 -timeout 40m $(PKGS)

lint:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool golangci-lint run $(PKGS)

bench:
	$(WITH_INFRA) $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -benchmem -timeout 60m $(PKGS)

demo run:
	@echo "make $@: not yet" >&2; exit 1

vuln:
	$(GO) tool govulncheck $(PKGS)
