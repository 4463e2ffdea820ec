// Package inbox makes the transfers projection's effect happen once per
// event: the handler's database work and the record of the event id commit
// in one transaction, so a redelivered event (at-least-once) finds its id
// and does nothing. The other consumers of the suite deduplicate on keys of
// their own (antifraud's decision and the ledger's processed marker per
// transfer, written in the transaction that decides it; the notification
// log per event id, whose send happens outside any transaction), so this
// package is the projection's alone.
package inbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/pkg/postgres"
)

// Inbox records processed events of one consumer.
type Inbox struct {
	db         *postgres.DB
	consumer   string
	duplicates prometheus.Counter
}

// DuplicatesCounter is the counter family of duplicates skipped, by consumer.
// Register it once per registry with NewDuplicatesCounter.
type DuplicatesCounter = *prometheus.CounterVec

// NewDuplicatesCounter creates inbox_duplicates_total and registers it on reg
// (nil: not registered).
func NewDuplicatesCounter(reg prometheus.Registerer) DuplicatesCounter {
	return promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "inbox_duplicates_total",
		Help: "Deliveries skipped because the inbox had already processed the event.",
	}, []string{"consumer"})
}

// New returns the inbox of consumer (a stable name, usually the consumer
// group). dups may be nil.
func New(db *postgres.DB, consumer string, dups DuplicatesCounter) *Inbox {
	if dups == nil {
		dups = NewDuplicatesCounter(nil)
	}
	return &Inbox{db: db, consumer: consumer, duplicates: dups.WithLabelValues(consumer)}
}

const markSQL = `INSERT INTO inbox_event (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`

// Consumer is the consumer name the inbox records event ids under, for
// callers that mark a batch of events in their own statement.
func (i *Inbox) Consumer() string { return i.consumer }

// CountDuplicates adds n deliveries skipped as already processed to the
// duplicates counter, for callers that mark events in their own statement.
func (i *Inbox) CountDuplicates(n int) {
	if n > 0 {
		i.duplicates.Add(float64(n))
	}
}

// Process runs fn and records eventID in one transaction. If eventID was
// already processed, fn does not run and Process returns duplicate = true.
// A concurrent delivery of the same event waits on the first one's row lock
// and then sees it as a duplicate. fn may be rerun on a serialization
// failure.
func (i *Inbox) Process(ctx context.Context, eventID uuid.UUID, fn func(tx pgx.Tx) error) (duplicate bool, err error) {
	err = i.db.InTx(ctx, func(tx pgx.Tx) error {
		duplicate = false
		tag, err := tx.Exec(ctx, markSQL, i.consumer, eventID)
		if err != nil {
			return fmt.Errorf("inbox mark %s: %w", eventID, err)
		}
		if tag.RowsAffected() == 0 {
			duplicate = true
			return nil
		}
		return fn(tx)
	})
	if err != nil {
		return false, err
	}
	if duplicate {
		i.duplicates.Inc()
	}
	return duplicate, nil
}
