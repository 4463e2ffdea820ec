// Package observability holds the cross-service tests of what operators rely
// on: every service's /metrics exposes the metric families that the alerts
// (deploy/prometheus/alerts.yml), the dashboard (deploy/grafana/payments.json)
// and the runbooks (docs/operations.md) use; the outbox gauges follow the
// publisher; /readyz follows the database; and the alerting rules and the
// dashboard only name metrics that exist, with runbooks that exist. With the
// same harness, TestConsumersReadCommitted checks that every consumer of the
// suite applies what committed Kafka transactions wrote and never what an
// aborted one wrote.
//
// The tests start the real services (Run) on a fresh PostgreSQL database and
// unique Kafka topics each (test/support/pgtest, test/support/kafkatest),
// with a TCP proxy in front of the database and a kafkatest.Dialer in front
// of Kafka so that a test can cut either one.
package observability
