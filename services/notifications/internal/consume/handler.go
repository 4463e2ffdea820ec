// Package consume turns the result records of transfers (liquidada,
// rejeitada, reservada, cancelada) and refunds (estorno.liquidado,
// estorno.rejeitado), and their retry topics, into notifications.
package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/webhook"
)

// Notifier is what the handler needs of the domain: notifications sent
// together (notify.Service).
type Notifier interface {
	NotifyBatch(ctx context.Context, ns []notify.Notification) error
}

// Handler decodes result records and notifies.
type Handler struct {
	notifier Notifier
	topics   events.Topics
}

// NewHandler returns the handler of the Settled, Rejected, Reserved,
// Cancelled, RefundSettled and RefundRejected topics of topics.
func NewHandler(n Notifier, topics events.Topics) *Handler {
	return &Handler{notifier: n, topics: topics}
}

// Handle is a consumer.Handler: the records fetched together notified
// with their log entries claimed, read and recorded together
// (notify.Service.NotifyBatch), an event id repeated among them in a run of
// its own. The record's main topic (the topic it was read from, or the
// main topic of that retry topic) says which event it is; the record key
// is the transfer's source account. An undecodable record, or one whose
// eventoId is not the id derived for its transfer and type, stops the
// batch there with an error wrapping events.ErrMalformed, which the
// consumer loop sends to the DLT at once. A failed send stops it at its
// record, sent once: the loop disposes of it by its policy (a retry topic)
// without sending it again at once. Either way Handle returns a
// consumer.BatchFailure naming the records done before it.
func (h *Handler) Handle(ctx context.Context, ms []broker.Record) error {
	ns, stop := consumer.DecodeUntil(ms, func(_ int, m broker.Record) (notify.Notification, error) { return h.decode(m) })
	for done := 0; done < len(ns); {
		run := distinct(ns[done:])
		err := h.notifier.NotifyBatch(ctx, run)
		if stopped, ok := errors.AsType[*notify.Stopped](err); ok {
			return consumer.StoppedAt(done+stopped.Done, stopped.Err)
		}
		if err != nil {
			return consumer.StoppedAt(done, err)
		}
		done += len(run)
	}
	return consumer.StoppedAt(len(ns), stop)
}

// distinct returns the longest prefix of ns with no event id twice, which
// NotifyBatch takes at once.
func distinct(ns []notify.Notification) []notify.Notification {
	seen := make(map[uuid.UUID]bool, len(ns))
	for i, n := range ns {
		if seen[n.EventID] {
			return ns[:i]
		}
		seen[n.EventID] = true
	}
	return ns
}

// decode reads m as the event of the topic it was read from (for a retry
// topic, that topic's main topic): which result it is, is a fact of where
// the record sits, never of its headers, which whoever wrote the record
// chose.
func (h *Handler) decode(m broker.Record) (notify.Notification, error) {
	n := notify.Notification{Account: string(m.Key), Topic: m.Topic}
	topic, ok := broker.MainTopicOf(m.Topic, h.topics.Settled, h.topics.Rejected, h.topics.Reserved, h.topics.Cancelled,
		h.topics.RefundSettled, h.topics.RefundRejected)
	if !ok {
		return n, consumer.Permanent(fmt.Errorf("record from unexpected topic %q", m.Topic))
	}
	var err error
	switch topic {
	case h.topics.Settled:
		var e events.Settled
		err = events.Decode(m.Value, &e)
		n.EventID, n.EventType, n.TransferID, n.OccurredAt = e.EventID, events.TypeSettled, e.TransferID, e.OccurredAt
		n.Status, n.AmountCents = webhook.StatusSettled, e.AmountCents
	case h.topics.Rejected:
		var e events.Rejected
		err = events.Decode(m.Value, &e)
		n.EventID, n.EventType, n.TransferID, n.OccurredAt = e.EventID, events.TypeRejected, e.TransferID, e.OccurredAt
		n.Status, n.Reason = webhook.StatusRejected, e.Reason
	case h.topics.Reserved:
		var e events.Reserved
		err = events.Decode(m.Value, &e)
		n.EventID, n.EventType, n.TransferID, n.OccurredAt = e.EventID, events.TypeReserved, e.TransferID, e.OccurredAt
		n.Status, n.AmountCents, n.ExpiresAt = webhook.StatusReserved, e.AmountCents, e.ExpiresAt
	case h.topics.RefundSettled:
		var e events.RefundSettled
		err = events.Decode(m.Value, &e)
		n.EventID, n.EventType, n.TransferID, n.RefundID, n.OccurredAt = e.EventID, events.TypeRefundSettled, e.TransferID, e.RefundID, e.OccurredAt
		n.Status, n.AmountCents = webhook.StatusRefundSettled, e.AmountCents
	case h.topics.RefundRejected:
		var e events.RefundRejected
		err = events.Decode(m.Value, &e)
		n.EventID, n.EventType, n.TransferID, n.RefundID, n.OccurredAt = e.EventID, events.TypeRefundRejected, e.TransferID, e.RefundID, e.OccurredAt
		n.Status, n.Reason = webhook.StatusRefundRejected, e.Reason
	default: // h.topics.Cancelled
		var e events.Cancelled
		err = events.Decode(m.Value, &e)
		n.EventID, n.EventType, n.TransferID, n.OccurredAt = e.EventID, events.TypeCancelled, e.TransferID, e.OccurredAt
		n.Status, n.Reason = webhook.StatusCancelled, e.Reason
		if e.Reason == events.ReasonExpired {
			n.Status = webhook.StatusExpired
		}
	}
	if err != nil {
		return n, fmt.Errorf("decode %s: %w", n.EventType, err)
	}
	// An event id names one transfer (or refund) and one kind
	// (events.CheckResultID, CheckRefundResultID): a record carrying
	// another's is poison, so it cannot take, in the notification log
	// keyed by event id, the place of that transfer's or refund's real
	// result.
	if n.RefundID != uuid.Nil {
		return n, events.CheckRefundResultID(n.EventType, n.EventID, n.RefundID)
	}
	return n, events.CheckResultID(n.EventType, n.EventID, n.TransferID)
}
