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
// A third of the load's transfers are holds (-chaos.holds, CONTRACTS
// section 9; holds_load_test.go): of those, 40% are captured once the
// ledger reserved them (half in part; one capture in ten first asks a
// cent more than reserved and is refused with 422), 20% cancelled, 15%
// raced (a capture and a cancellation sent at once) and 25% left to
// expire, with expiraEm -chaos.hold-expiry (150 s) after the request, so
// that they expire while the faults run; the run then waits for the last
// of them to expire (at most that long after the load stops). Snapshots
// read each account's reserved amount and the ledger's reservations, the
// reservada and cancelada records are judged with the others, and the
// stores' checks add the hold invariants. Three anomalies are injected by
// default (-chaos.inject) and must be reported as exactly their kinds: a
// stale read, a captured hold released a second time (released-twice),
// and a settled refund rejected too (refund-status).
//
// A fifth of the other transfers are refunded once settled (-chaos.refunds,
// CONTRACTS section 10; refunds_load_test.go) by the destination's
// titular while the faults run: 40% once (in part, or all that remains),
// 30% twice at once with different keys asking together more than was
// paid (the ledger settles at most what was paid), 30% in part and then
// beyond what remains (a 422 or a REJEITADO VALOR_EXCEDE_ESTORNAVEL).
// Each refund is read until its end, and every one again at the end.
// Snapshots read each refund entry's transfer and, with
// -chaos.statements (the default), every posting's running balance; the
// run ends with statements and balances at instants of four accounts
// (CONTRACTS section 11), and the stores' checks add the refund
// invariants.
//
// The test is behind the "chaos" build tag, so `go test ./...` does not run
// it: `make chaos` (or `go test -tags chaos ./test/chaos/`). Its flags are
// listed in chaos_test.go.
package chaos
