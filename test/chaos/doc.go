// Package chaos holds the fault test (`make chaos`): the four
// services built as binaries and run as separate OS processes (transfers
// twice, so a killed relay has a sibling to take its leases over), each on
// its own database of a PostgreSQL the test starts with fsync on, over a
// Kafka KRaft broker the test starts from the Apache jars, scraped by a real
// Prometheus with deploy/prometheus/alerts.yml. An open-loop load of
// transfers runs while faults are injected in sequence (kill -9 of each
// service, two at once, the broker, a PostgreSQL crash-restart, a stopped
// database, poison and duplicate records); the outcome is checked by SQL and
// by reading Kafka, and a table of figures is printed. Every client
// operation, balance snapshot, record and webhook is also recorded as it
// happens in history.jsonl next to the logs and judged by test/chaos/history; any
// anomaly fails the test.
//
// The test is behind the "chaos" build tag, so `go test ./...` does not run
// it: `make chaos` (or `go test -tags chaos ./test/chaos/`). Its flags are
// listed in chaos_test.go.
package chaos
