// Package platform holds the pieces every service's run calls before and
// around its own code, in the order the run reads: configuration from
// environment variables (Config), the logger and tracing, the metrics
// registry, the pool and its migrations, the Kafka producer, the outbox
// relay, the readiness probe, the authenticator and the HTTP router; then
// Serve, which runs the server, the consumers and the relay and stops them
// in one stated order. Main is the one command dispatcher of the service
// binaries and Exit their main.
package platform
