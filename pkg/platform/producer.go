package platform

import (
	"context"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
)

// Producer is the service's Kafka client for what it publishes: the
// relay's sends and the readiness probe's ping. NewProducer builds it,
// pingProducer pings it; nothing else in the package knows its type.
type Producer = kafka.Writer

// NewProducer builds the service's producer with pkg/broker's settings
// (keys partitioned as the Java client does), its batches as large as the
// relay's claim. The caller closes it after the relay has stopped and
// before the pool closes.
func NewProducer(cfg Config) (*Producer, error) {
	return broker.NewWriter(cfg.Kafka, cfg.Relay.ClaimSize()), nil
}

// pingProducer asks a broker, through p's connections and with its TLS
// and SASL settings, whether it answers.
func pingProducer(ctx context.Context, p *Producer) error {
	return broker.Ping(ctx, p)
}
