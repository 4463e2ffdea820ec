// Package notify is the notifications domain: tell a customer the result of
// a transfer once per result event, through a channel (a signed webhook, or
// the log in development), keeping a log keyed by event id so that an event
// Kafka delivers again after its notification succeeded sends nothing.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/outage"
)

// Notification is the result of a transfer to tell its customer about.
type Notification struct {
	// EventID is the result event's id: the key of the notification log.
	EventID uuid.UUID
	// EventType is TransferenciaLiquidada or TransferenciaRejeitada.
	EventType string
	// TransferID is the transfer the result is about.
	TransferID uuid.UUID
	// Status is LIQUIDADA or REJEITADA.
	Status string
	// Reason is the rejection reason (motivo); empty when settled.
	Reason string
	// OccurredAt is when the result happened.
	OccurredAt time.Time
	// Account is the transfer's source account (the record key), which
	// picks the destination.
	Account string
}

// Status of a log entry.
type Status string

// Log entry statuses. Only Delivered is final: every other status lets a
// later delivery of the event try again.
const (
	StatusPending       Status = "PENDING"
	StatusDelivered     Status = "DELIVERED"
	StatusFailed        Status = "FAILED"
	StatusNoDestination Status = "NO_DESTINATION"
)

// Entry is one row of the notification log.
type Entry struct {
	EventID     uuid.UUID
	TransferID  uuid.UUID
	Channel     string
	Status      Status
	Attempts    int
	DeliveredAt time.Time // zero unless delivered
	LastError   string
}

// Outcome is what an attempt to notify came to; Claim records it.
type Outcome struct {
	// Status is the entry's new status; Delivered needs At.
	Status Status
	At     time.Time
	// Err is the send failure (FAILED) or the reason there was nothing to
	// send (NO_DESTINATION).
	Err error
}

// Store is the notification log.
type Store interface {
	// Claim creates the entry of n.EventID (PENDING) if there is none and
	// holds the event's claim while attempt runs, in no transaction: a
	// concurrent Claim of the same event waits and then sees what this one
	// recorded. attempt receives the
	// entry as it was; when it returns ok = false nothing is recorded,
	// otherwise its Outcome is recorded (attempts + 1). attempt runs exactly
	// once per call. Claim returns the entry as left.
	Claim(ctx context.Context, n Notification, channel string, attempt func(e Entry) (o Outcome, ok bool)) (Entry, error)
	// Get returns the entry of eventID, or ErrNotFound.
	Get(ctx context.Context, eventID uuid.UUID) (Entry, error)
}

// Sender delivers a notification through one channel.
type Sender interface {
	// Channel names the channel (log, webhook) in the log and metrics.
	Channel() string
	// Send delivers n. It returns nil once the receiver acknowledged,
	// ErrNoDestination when there is nowhere to send n, an error wrapping
	// ErrOutcomeUnknown when the receiver may or may not have got it (a
	// timeout), or another error when it was refused or not sent.
	Send(ctx context.Context, n Notification) error
}

// Errors of the domain.
var (
	// ErrNotFound: no log entry for that event.
	ErrNotFound = errors.New("notification not found")
	// ErrNoDestination: no destination is configured for the account.
	ErrNoDestination = errors.New("no destination configured for the account")
	// ErrOutcomeUnknown: the send timed out; the receiver may have got it,
	// so the send is retried and the receiver deduplicates on the event id.
	ErrOutcomeUnknown = errors.New("notification outcome unknown")
)

// Metrics count sends by channel and outcome.
type Metrics struct {
	Sends    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

// Send outcomes, the "outcome" label of notifications_sends_total.
const (
	OutcomeDelivered     = "delivered"
	OutcomeFailed        = "failed"
	OutcomeTimeout       = "timeout"
	OutcomeNoDestination = "no_destination"
	OutcomeDuplicate     = "duplicate"
)

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notifications_sends_total",
			Help: "Notification attempts by channel and outcome (delivered, failed, timeout, no_destination, duplicate).",
		}, []string{"channel", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "notifications_send_duration_seconds",
			Help:    "Duration of notification sends by channel.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"channel"}),
	}
	if reg != nil {
		reg.MustRegister(m.Sends, m.Duration)
	}
	return m
}

// Service notifies customers of transfer results.
type Service struct {
	store   Store
	sender  Sender
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
}

// NewService returns a service sending through sender and logging in
// store. metrics may be nil.
func NewService(store Store, sender Sender, metrics *Metrics, log *slog.Logger) *Service {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Service{store: store, sender: sender, metrics: metrics, log: log, now: time.Now}
}

// Notify sends n unless its event was already notified. While it sends, the
// event stays claimed (no transaction is open), so a concurrent delivery of
// the same event waits and then sends nothing.
//
// It returns nil when n was delivered now or before, or when there is no
// destination for its account (recorded as NO_DESTINATION: a later
// delivery, a replay say, tries again). It returns an error, to be retried,
// when the send failed or its outcome is unknown (wrapping
// ErrOutcomeUnknown), or when the log could not be read or written; in that
// last case the notification may have been sent, and a retry sends it
// again: delivery is at-least-once, deduplicated by receivers on the event
// id.
func (s *Service) Notify(ctx context.Context, n Notification) error {
	channel := s.sender.Channel()
	log := s.log.With("evento_id", n.EventID, "transfer_id", n.TransferID, "channel", channel)
	var (
		sendErr error
		outcome string
	)
	entry, err := s.store.Claim(ctx, n, channel, func(e Entry) (Outcome, bool) {
		if e.Status == StatusDelivered {
			outcome = OutcomeDuplicate
			return Outcome{}, false
		}
		start := s.now()
		sendErr = s.sender.Send(ctx, n)
		s.metrics.Duration.WithLabelValues(channel).Observe(s.now().Sub(start).Seconds())
		switch {
		case sendErr == nil:
			outcome = OutcomeDelivered
			return Outcome{Status: StatusDelivered, At: s.now()}, true
		case errors.Is(sendErr, ErrNoDestination):
			outcome = OutcomeNoDestination
			return Outcome{Status: StatusNoDestination, Err: sendErr}, true
		case errors.Is(sendErr, ErrOutcomeUnknown):
			outcome = OutcomeTimeout
		default:
			outcome = OutcomeFailed
		}
		return Outcome{Status: StatusFailed, Err: sendErr}, true
	})
	if outcome != "" {
		s.metrics.Sends.WithLabelValues(channel, outcome).Inc()
	}
	if err != nil {
		if outcome == OutcomeDelivered {
			log.WarnContext(ctx, "notification sent but not recorded; it will be sent again", "err", err)
		}
		return fmt.Errorf("notify event %s: %w", n.EventID, err)
	}
	switch outcome {
	case OutcomeDuplicate:
		log.InfoContext(ctx, "notification already delivered; nothing sent", "delivered_at", entry.DeliveredAt)
		return nil
	case OutcomeDelivered:
		log.InfoContext(ctx, "notification delivered", "attempts", entry.Attempts)
		return nil
	case OutcomeNoDestination:
		log.WarnContext(ctx, "no destination for the account; nothing sent", "account", n.Account)
		return nil
	}
	log.WarnContext(ctx, "notification failed", "attempts", entry.Attempts, "outcome", outcome, "err", sendErr)
	// A receiver that is down is what the retry topics are for, not an
	// outage of this service (which the consumer loop waits out).
	return fmt.Errorf("notify event %s: %w", n.EventID, outage.Exempt(sendErr))
}
