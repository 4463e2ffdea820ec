package platform

import (
	"context"

	"github.com/paysuite/payments/pkg/broker"
)

// Producer is the service's Kafka producer for what it publishes: the
// relay's sends and the readiness probe's ping.
type Producer = broker.Producer

// NewProducer builds the service's producer with pkg/broker's settings
// (idempotent, acks from all in-sync replicas, keys partitioned as the Java
// client does). The caller closes it after the relay has stopped and before
// the pool closes.
func NewProducer(cfg Config) (*Producer, error) {
	return broker.NewProducer(cfg.Kafka)
}

// pingProducer asks a broker, through p's connections and with its TLS
// and SASL settings, whether it answers.
func pingProducer(ctx context.Context, p *Producer) error {
	return p.Ping(ctx)
}
