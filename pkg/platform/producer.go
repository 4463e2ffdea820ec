package platform

import "github.com/paysuite/payments/pkg/broker"

// NewProducer builds the service's Kafka producer, for what it publishes
// (the relay's sends and the readiness probe's ping), with pkg/broker's settings
// (idempotent, acks from all in-sync replicas, keys partitioned as the Java
// client does). The caller closes it after the relay has stopped and before
// the pool closes.
func NewProducer(cfg Config) (*broker.Producer, error) {
	return broker.NewProducer(cfg.Kafka)
}
