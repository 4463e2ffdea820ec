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

	"github.com/paysuite/payments/pkg/outage"
)

// Notification is the result of a transfer to tell its customer about.
type Notification struct {
	// EventID is the result event's id: the key of the notification log.
	EventID uuid.UUID
	// EventType is TransferenciaLiquidada, TransferenciaRejeitada,
	// TransferenciaReservada, TransferenciaCancelada, EstornoLiquidado or
	// EstornoRejeitado.
	EventType string
	// TransferID is the transfer the result is about (a refund's: the
	// transfer refunded).
	TransferID uuid.UUID
	// RefundID is the refund a refund's result is about; zero for a
	// transfer's result.
	RefundID uuid.UUID
	// Status is LIQUIDADA, REJEITADA, RESERVADA, CANCELADA or EXPIRADA;
	// a refund's LIQUIDADO or REJEITADO.
	Status string
	// Reason is the rejection or release reason (motivo); empty when
	// settled or reserved.
	Reason string
	// AmountCents is the amount a hold reserved, a capture settled or a
	// refund returned; zero for an immediate transfer's result.
	AmountCents int64
	// ExpiresAt is when a reservation expires; zero unless reserved.
	ExpiresAt time.Time
	// OccurredAt is when the result happened.
	OccurredAt time.Time
	// Account is the transfer's source account (the record key), which
	// picks the destination.
	Account string
	// Topic is the topic the record was read from: the main topic, or one
	// of its retry topics. Each attempt is recorded with it.
	Topic string
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
	// ClaimAll is Claim for many events at once: the claims of all of ns
	// are held while attempt runs for each of them in order, their entries
	// are created and read in one round trip, and the outcomes are
	// recorded with one statement. attempt returns stop = true to attempt
	// none of the events after ns[i] (their entries are left as they
	// were). ns must have distinct event ids. ClaimAll returns the entries
	// as left.
	ClaimAll(ctx context.Context, ns []Notification, channel string, attempt func(i int, e Entry) (o Outcome, ok, stop bool)) ([]Entry, error)
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
	var a attempt
	entry, err := s.store.Claim(ctx, n, channel, func(e Entry) (Outcome, bool) {
		a = s.attempt(ctx, n, e)
		return a.recorded, a.record
	})
	return s.finish(ctx, n, channel, a, entry, err)
}

// NotifyBatch is Notify for each of ns in order, their claims held together
// and their log entries read and written with one statement each. It stops
// at the first notification that fails (after recording its attempt) and
// returns *Stopped naming it; any other error (the claims, or an event id
// repeated in ns) is returned as is, and the caller tries again, where the
// notifications delivered here are duplicates and send nothing.
func (s *Service) NotifyBatch(ctx context.Context, ns []Notification) error {
	seen := make(map[uuid.UUID]bool, len(ns))
	for _, n := range ns {
		if seen[n.EventID] {
			return fmt.Errorf("notify batch: event %s twice", n.EventID)
		}
		seen[n.EventID] = true
	}
	channel := s.sender.Channel()
	as := make([]attempt, len(ns))
	entries, err := s.store.ClaimAll(ctx, ns, channel, func(i int, e Entry) (Outcome, bool, bool) {
		as[i] = s.attempt(ctx, ns[i], e)
		return as[i].recorded, as[i].record, as[i].failed()
	})
	var first error
	firstAt := -1
	for i, n := range ns {
		if as[i].outcome == "" {
			continue // not attempted: an earlier one failed, or the claim did
		}
		var e Entry
		if i < len(entries) {
			e = entries[i]
		}
		if ferr := s.finish(ctx, n, channel, as[i], e, err); ferr != nil && first == nil {
			first, firstAt = ferr, i
		}
	}
	if first == nil && err != nil {
		first = fmt.Errorf("notify %d events: %w", len(ns), err)
	}
	if first != nil && err == nil && as[firstAt].failed() {
		// Recorded, and the send of ns[firstAt] failed: that attempt counts,
		// it is not made again at once.
		return &Stopped{Done: firstAt, Err: first}
	}
	return first
}

// Stopped is NotifyBatch's error when its claims were recorded and the send
// of ns[Done] failed: ns[:Done] are finished, ns[Done] was attempted once
// (its attempt recorded) and failed with Err, ns[Done+1:] were not tried.
type Stopped struct {
	Done int
	Err  error
}

func (e *Stopped) Error() string { return e.Err.Error() }
func (e *Stopped) Unwrap() error { return e.Err }

// attempt is one try at a notification: what was sent and what to record.
type attempt struct {
	outcome  string // a notifications_sends_total outcome; "" when not attempted
	sendErr  error
	recorded Outcome
	record   bool
}

func (a attempt) failed() bool {
	return a.outcome == OutcomeFailed || a.outcome == OutcomeTimeout
}

// attempt sends n unless its entry e says it was delivered.
func (s *Service) attempt(ctx context.Context, n Notification, e Entry) attempt {
	if e.Status == StatusDelivered {
		return attempt{outcome: OutcomeDuplicate}
	}
	channel := s.sender.Channel()
	start := s.now()
	err := s.sender.Send(ctx, n)
	s.metrics.Duration.WithLabelValues(channel).Observe(s.now().Sub(start).Seconds())
	switch {
	case err == nil:
		return attempt{outcome: OutcomeDelivered, recorded: Outcome{Status: StatusDelivered, At: s.now()}, record: true}
	case errors.Is(err, ErrNoDestination):
		return attempt{outcome: OutcomeNoDestination, sendErr: err, recorded: Outcome{Status: StatusNoDestination, Err: err}, record: true}
	case errors.Is(err, ErrOutcomeUnknown):
		return attempt{outcome: OutcomeTimeout, sendErr: err, recorded: Outcome{Status: StatusFailed, Err: err}, record: true}
	default:
		return attempt{outcome: OutcomeFailed, sendErr: err, recorded: Outcome{Status: StatusFailed, Err: err}, record: true}
	}
}

// finish counts and logs attempt a of n, whose claim ended with entry and
// err, and returns Notify's error.
func (s *Service) finish(ctx context.Context, n Notification, channel string, a attempt, entry Entry, err error) error {
	log := s.log.With("evento_id", n.EventID, "transfer_id", n.TransferID, "channel", channel)
	if a.outcome != "" {
		s.metrics.Sends.WithLabelValues(channel, a.outcome).Inc()
	}
	if err != nil {
		if a.outcome == OutcomeDelivered {
			log.WarnContext(ctx, "notification sent but not recorded; it will be sent again", "err", err)
		}
		return fmt.Errorf("notify event %s: %w", n.EventID, err)
	}
	switch a.outcome {
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
	log.WarnContext(ctx, "notification failed", "attempts", entry.Attempts, "outcome", a.outcome, "err", a.sendErr)
	// A receiver that is down is what the retry topics are for, not an
	// outage of this service (which the consumer loop waits out).
	return fmt.Errorf("notify event %s: %w", n.EventID, outage.Exempt(a.sendErr))
}
