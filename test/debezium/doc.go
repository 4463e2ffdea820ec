// Package debezium runs Debezium's PostgreSQL connector and outbox event
// router, configured as deploy/README.md documents ("Debezium instead of the
// polling relay"), in a Kafka Connect standalone worker (the jars of
// test/infra/debezium/pom.xml, resolved into .cache/debezium by
// test/infra/debezium/resolve.sh), against the real PostgreSQL and broker of
// the tests, on the outbox the services write through pkg/outbox.
//
// TestDebeziumRecordsAsTheRelays checks that the suite's consumer loop and
// event decoding take what Debezium publishes as they take the relays'
// records, and says what Debezium does not carry; BenchmarkDebeziumBeside
// measures Debezium beside the polling and the logical relay in one run,
// each measured by consuming its records from the topic.
//
// Everything is behind the "debezium" build tag, since a Connect worker is
// a JVM of its own: `make debezium` and `make bench-debezium`.
package debezium
