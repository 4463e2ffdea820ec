package events

import (
	"time"

	"github.com/google/uuid"
)

// Message is one outgoing event as a domain package builds it: where it
// goes, what it says and about what. The domains return their events; the
// stores write them to their outbox (pkg/outbox) in the transaction of the
// change they announce, so that a domain never touches the outbox.
type Message struct {
	// ID is the event id (evento-id); uuid.Nil makes a random one.
	ID uuid.UUID
	// AggregateType and AggregateID name what the event is about, for
	// operators ("transfer", its id).
	AggregateType string
	AggregateID   string
	// Topic, Key and Type say where it goes: the Kafka topic, the record key
	// and the evento-tipo header.
	Topic string
	Key   string
	Type  string
	// Payload is the JSON body.
	Payload []byte
	// Headers are extra record headers (traceparent, correlation-id).
	Headers map[string]string
	// OccurredAt is when the business fact happened; zero means now.
	OccurredAt time.Time
}
